/* mock_cublaslt.c - cuBLASLt for a machine without a GPU, built as
 * libcublasLt.so.13 beside the mock driver (mock_cuda.c) for the tests.
 *
 * It computes what cuBLASLt's documentation says cublasLtMatmul computes,
 * and refuses what the library refuses, so that a mistake in how
 * runtime/gpu.c describes a matmul shows on the CPU as a wrong number or an
 * error instead of on the first GPU it meets:
 *  - matrices are column-major (CUBLASLT_ORDER_COL, the default); a layout
 *    is the matrix as stored, before op(); D = alpha op(A) op(B) + beta C,
 *    C and D of one shape, C unread when beta is 0;
 *  - strided batches: BATCH_COUNT equal for every matrix, a STRIDED_BATCH_OFFSET
 *    (elements) each, 0 for an operand shared by every batch;
 *  - types with CUBLAS_COMPUTE_32F and CUDA_R_32F scale: A and B both 16F,
 *    16BF or 32F; C and D alike, of A's type or 32F (32F A only with 32F D);
 *  - epilogues BIAS, RELU(_BIAS), GELU(_BIAS), GELU_AUX(_BIAS), DGELU: the
 *    bias is a vector of D's rows in D's type (BIAS_DATA_TYPE's default),
 *    added to every column; GELU is the tanh approximation; the auxiliary
 *    buffer holds GELU's input (after the bias) in D's type (AUX_DATA_TYPE's
 *    default) with EPILOGUE_AUX_LD a multiple of 8 and at least D's rows;
 *    DGELU multiplies the product by GELU's slope at the auxiliary value.
 *    Epilogues are refused on batched products (their bias and auxiliary
 *    batch strides are not modelled);
 *  - every byte a matmul touches lies in device memory.
 * Products are computed in f32 with OpenBLAS, from operands widened to f32,
 * and rounded once to D's type (round to nearest even). */
#include "mock_cuda.h"

#include <cblas.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mlt_layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld, stride;
    int32_t batch;
} mlt_layout;

typedef struct mlt_desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa, transb;
    uint32_t epilogue;
    const void *bias;
    void *aux;
    int64_t aux_ld;
} mlt_desc;

static const uint64_t mlt_algo_tag = 0x6e657463206d6f63ULL;   /* "netc moc" */

static void mlt_complain(const char *what, const char *detail)
{
    fprintf(stderr, "mock cuBLASLt: %s: %s\n", what, detail);
}

/* ---- handles and descriptors ------------------------------------------- */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = (cublasLtHandle_t)calloc(1, 16);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out, cublasComputeType_t compute, cudaDataType_t scale)
{
    mlt_desc *d = calloc(1, sizeof *d);
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    *d = (mlt_desc){.compute = compute, .scale = scale, .transa = CUBLAS_OP_N, .transb = CUBLAS_OP_N,
                    .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
    *out = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

/* Copies an attribute's value when its size is the attribute's. */
static bool mlt_take(void *field, size_t field_size, const void *buf, size_t size, const char *name)
{
    if (size != field_size || !buf) {
        mlt_complain(name, "set with the wrong size");
        return false;
    }
    memcpy(field, buf, size);
    return true;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
    mlt_desc *d = (mlt_desc *)desc;
    bool ok;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = mlt_take(&d->transa, sizeof d->transa, buf, size, "TRANSA"); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = mlt_take(&d->transb, sizeof d->transb, buf, size, "TRANSB"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = mlt_take(&d->epilogue, sizeof d->epilogue, buf, size, "EPILOGUE"); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = mlt_take(&d->bias, sizeof d->bias, buf, size, "BIAS_POINTER"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = mlt_take(&d->aux, sizeof d->aux, buf, size, "EPILOGUE_AUX_POINTER"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = mlt_take(&d->aux_ld, sizeof d->aux_ld, buf, size, "EPILOGUE_AUX_LD"); break;
    default:
        mlt_complain("cublasLtMatmulDescSetAttribute", "an attribute the mock does not model (it could change results)");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (ok && (attr == CUBLASLT_MATMUL_DESC_TRANSA || attr == CUBLASLT_MATMUL_DESC_TRANSB)) {
        int32_t t = attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb;
        ok = t == CUBLAS_OP_N || t == CUBLAS_OP_T;
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld)
{
    mlt_layout *l = calloc(1, sizeof *l);
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    *l = (mlt_layout){.type = type, .rows = rows, .cols = cols, .ld = ld, .batch = 1};
    *out = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                                size_t size)
{
    mlt_layout *l = (mlt_layout *)layout;
    int32_t order;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        return mlt_take(&l->batch, sizeof l->batch, buf, size, "BATCH_COUNT") && l->batch >= 1 ? CUBLAS_STATUS_SUCCESS
                                                                                                   : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        return mlt_take(&l->stride, sizeof l->stride, buf, size, "STRIDED_BATCH_OFFSET") ? CUBLAS_STATUS_SUCCESS
                                                                                          : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
        if (!mlt_take(&order, sizeof order, buf, size, "ORDER")) return CUBLAS_STATUS_INVALID_VALUE;
        if (order == CUBLASLT_ORDER_COL) return CUBLAS_STATUS_SUCCESS;
        mlt_complain("ORDER", "only column-major layouts are modelled");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    default:
        mlt_complain("cublasLtMatrixLayoutSetAttribute", "an attribute the mock does not model");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = (cublasLtMatmulPreference_t)calloc(1, sizeof(uint64_t));
    return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return CUBLAS_STATUS_INVALID_VALUE;
    return mlt_take(p, sizeof(uint64_t), buf, size, "MAX_WORKSPACE_BYTES") ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

/* ---- what a matmul is, checked -------------------------------------------- */

typedef struct mlt_problem {
    mlt_layout a, b, c;
    mlt_desc d;
    int64_t m, n, k;
    float alpha, beta;
    const void *pa, *pb, *pc;
    void *pd;
} mlt_problem;

static size_t mlt_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
static bool mlt_float_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

static bool mlt_epilogue_known(uint32_t e, bool *bias, bool *aux)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_GELU: *bias = *aux = false; return true;
    case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_GELU_BIAS: *bias = true, *aux = false; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_DGELU: *bias = false, *aux = true; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: *bias = *aux = true; return true;
    default: return false;
    }
}

/* Whether the description is one cuBLASLt computes; why not in *why. */
static cublasStatus_t mlt_check_shapes(const mlt_problem *p, const char **why)
{
    const mlt_desc *d = &p->d;
    if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F) return *why = "compute type other than 32F", CUBLAS_STATUS_NOT_SUPPORTED;
    cudaDataType_t ta = p->a.type, tc = p->c.type;
    if (!mlt_float_type(ta) || p->b.type != ta) return *why = "A and B of different or unknown types", CUBLAS_STATUS_NOT_SUPPORTED;
    if (!(tc == ta || tc == CUDA_R_32F)) return *why = "D neither of A's type nor 32F", CUBLAS_STATUS_NOT_SUPPORTED;
    uint64_t am = d->transa == CUBLAS_OP_N ? p->a.rows : p->a.cols, ak = d->transa == CUBLAS_OP_N ? p->a.cols : p->a.rows;
    uint64_t bk = d->transb == CUBLAS_OP_N ? p->b.rows : p->b.cols, bn = d->transb == CUBLAS_OP_N ? p->b.cols : p->b.rows;
    if (ak != bk || am != p->c.rows || bn != p->c.cols || am == 0 || bn == 0 || ak == 0)
        return *why = "op(A), op(B) and D do not fit", CUBLAS_STATUS_INVALID_VALUE;
    const mlt_layout *ls[] = {&p->a, &p->b, &p->c};
    for (int i = 0; i < 3; i++)
        if (ls[i]->ld < (int64_t)ls[i]->rows || ls[i]->ld < 1) return *why = "a leading dimension below the rows", CUBLAS_STATUS_INVALID_VALUE;
    if (p->a.batch != p->c.batch || p->b.batch != p->c.batch) return *why = "batch counts differ", CUBLAS_STATUS_INVALID_VALUE;
    bool bias, aux;
    if (!mlt_epilogue_known(d->epilogue, &bias, &aux)) return *why = "an epilogue the mock does not model", CUBLAS_STATUS_NOT_SUPPORTED;
    if ((bias || aux) && p->c.batch > 1) return *why = "an epilogue with a bias or auxiliary buffer on a batched product", CUBLAS_STATUS_NOT_SUPPORTED;
    if (bias && !d->bias) return *why = "a bias epilogue without BIAS_POINTER", CUBLAS_STATUS_INVALID_VALUE;
    if (aux && (!d->aux || d->aux_ld < (int64_t)p->c.rows || d->aux_ld % 8 != 0))
        return *why = "an auxiliary buffer without a pointer, or its EPILOGUE_AUX_LD below D's rows or not a multiple of 8",
               CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

/* Bytes from a matrix's first element to one past its last. */
static size_t mlt_extent(const mlt_layout *l)
{
    int64_t last = (int64_t)(l->batch - 1) * l->stride + (int64_t)(l->rows - 1) + (int64_t)(l->cols - 1) * l->ld;
    return (size_t)(last + 1) * mlt_size(l->type);
}

static cublasStatus_t mlt_check_memory(const mlt_problem *p, const void *workspace, size_t workspace_bytes, const char **why)
{
    size_t es = mlt_size(p->c.type);
    struct { const void *ptr; size_t bytes, align; const char *what; } r[] = {
        {p->pa, mlt_extent(&p->a), mlt_size(p->a.type), "A"},
        {p->pb, mlt_extent(&p->b), mlt_size(p->b.type), "B"},
        {p->pd, mlt_extent(&p->c), es, "D"},
        {p->beta != 0 ? p->pc : NULL, mlt_extent(&p->c), es, "C"},
        {p->d.bias, (size_t)p->m * es, es, "the bias"},
        {p->d.aux, (size_t)((p->n - 1) * p->d.aux_ld + p->m) * es, es, "the auxiliary buffer"},
        {workspace_bytes ? workspace : NULL, workspace_bytes, 1, "the workspace"},
    };
    bool bias, aux;
    mlt_epilogue_known(p->d.epilogue, &bias, &aux);
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        if (!r[i].ptr || (i == 4 && !bias) || (i == 5 && !aux)) continue;
        if ((uintptr_t)r[i].ptr % r[i].align || !mock_cuda_in_device_memory(r[i].ptr, r[i].bytes)) {
            static char msg[128];
            snprintf(msg, sizeof msg, "%s is misaligned or not inside one device allocation", r[i].what);
            return *why = msg, CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int *found)
{
    if (!h || !desc || !a || !b || !c || !d || !pref || requested < 1 || !results || !found) return CUBLAS_STATUS_INVALID_VALUE;
    *found = 0;
    mlt_problem p = {.a = *(mlt_layout *)a, .b = *(mlt_layout *)b, .c = *(mlt_layout *)c, .d = *(mlt_desc *)desc};
    const mlt_layout *dl = (const mlt_layout *)d;
    if (memcmp(&p.c, dl, sizeof p.c) != 0) return CUBLAS_STATUS_NOT_SUPPORTED;   /* D laid out unlike C */
    const char *why = NULL;
    cublasStatus_t st = mlt_check_shapes(&p, &why);
    if (st != CUBLAS_STATUS_SUCCESS) {
        mlt_complain("cublasLtMatmulAlgoGetHeuristic", why);
        return st;
    }
    memset(&results[0], 0, sizeof results[0]);
    memcpy(results[0].algo.data, &mlt_algo_tag, sizeof mlt_algo_tag);
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the arithmetic --------------------------------------------------- */

static float mlt_load(cudaDataType_t t, const void *p, int64_t i)
{
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == CUDA_R_16BF) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

static void mlt_store(cudaDataType_t t, void *p, int64_t i, float v)
{
    if (t == CUDA_R_32F) { ((float *)p)[i] = v; return; }
    uint16_t h;
    if (t == CUDA_R_16BF) {
        uint32_t u;
        memcpy(&u, &v, 4);
        h = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u) : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else {
        _Float16 x = (_Float16)v;
        memcpy(&h, &x, 2);
    }
    ((uint16_t *)p)[i] = h;
}

static float mlt_gelu(float x)
{
    const float k = 0.7978845608028654f;   /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

static float mlt_gelu_slope(float x)
{
    const float k = 0.7978845608028654f;
    float t = tanhf(k * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

/* A matrix of a batch widened to a dense column-major f32 copy (ld = rows). */
static float *mlt_widen(const mlt_layout *l, const void *base, int64_t batch)
{
    float *out = malloc(l->rows * l->cols * sizeof *out + 1);
    if (!out) abort();
    int64_t at = batch * l->stride;
    for (uint64_t c = 0; c < l->cols; c++)
        for (uint64_t r = 0; r < l->rows; r++) out[c * l->rows + r] = mlt_load(l->type, base, at + (int64_t)(r + c * (uint64_t)l->ld));
    return out;
}

static float mlt_epilogue(const mlt_problem *p, float x, int64_t i, int64_t j)
{
    uint32_t e = p->d.epilogue;
    cudaDataType_t t = p->c.type;
    bool bias, aux;
    mlt_epilogue_known(e, &bias, &aux);
    if (bias) x += mlt_load(t, p->d.bias, i);
    if (e == CUBLASLT_EPILOGUE_DGELU) return x * mlt_gelu_slope(mlt_load(t, p->d.aux, i + j * p->d.aux_ld));
    if (aux) mlt_store(t, p->d.aux, i + j * p->d.aux_ld, x);
    if (e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS) return x > 0 ? x : 0;
    if (e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
        e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        return mlt_gelu(x);
    return x;
}

static void mlt_run(void *ctx)
{
    const mlt_problem *p = ctx;
    float *prod = malloc((size_t)(p->m * p->n) * sizeof *prod + 1);
    if (!prod) abort();
    for (int64_t bt = 0; bt < p->c.batch; bt++) {
        float *a = mlt_widen(&p->a, p->pa, bt), *b = mlt_widen(&p->b, p->pb, bt);
        cblas_sgemm(CblasColMajor, p->d.transa == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                    p->d.transb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, (int)p->m, (int)p->n, (int)p->k, p->alpha, a,
                    (int)p->a.rows, b, (int)p->b.rows, 0.0f, prod, (int)p->m);
        int64_t at = bt * p->c.stride;
        for (int64_t j = 0; j < p->n; j++)
            for (int64_t i = 0; i < p->m; i++) {
                int64_t off = at + i + j * p->c.ld;
                float x = prod[i + j * p->m];
                if (p->beta != 0) x += p->beta * mlt_load(p->c.type, p->pc, off);
                mlt_store(p->c.type, p->pd, off, mlt_epilogue(p, x, i, j));
            }
        free(a);
        free(b);
    }
    free(prod);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A, cublasLtMatrixLayout_t ad,
                              const void *B, cublasLtMatrixLayout_t bd, const void *beta, const void *C, cublasLtMatrixLayout_t cd,
                              void *D, cublasLtMatrixLayout_t dd, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream)
{
    if (!h || !desc || !alpha || !beta || !ad || !bd || !cd || !dd || !A || !B || !D) return CUBLAS_STATUS_INVALID_VALUE;
    if (!algo || memcmp(algo->data, &mlt_algo_tag, sizeof mlt_algo_tag) != 0) {
        mlt_complain("cublasLtMatmul", "an algorithm the heuristic did not give");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    mlt_problem p = {.a = *(mlt_layout *)ad, .b = *(mlt_layout *)bd, .c = *(mlt_layout *)cd, .d = *(mlt_desc *)desc,
                     .alpha = *(const float *)alpha, .beta = *(const float *)beta, .pa = A, .pb = B, .pc = C, .pd = D};
    const char *why = NULL;
    cublasStatus_t st = memcmp(&p.c, (mlt_layout *)dd, sizeof p.c) ? CUBLAS_STATUS_NOT_SUPPORTED : mlt_check_shapes(&p, &why);
    p.m = (int64_t)p.c.rows, p.n = (int64_t)p.c.cols;
    p.k = (int64_t)(p.d.transa == CUBLAS_OP_N ? p.a.cols : p.a.rows);
    if (st == CUBLAS_STATUS_SUCCESS && p.beta != 0 && !C) st = CUBLAS_STATUS_INVALID_VALUE, why = "beta without C";
    if (st == CUBLAS_STATUS_SUCCESS) st = mlt_check_memory(&p, workspace, workspace_bytes, &why);
    if (st != CUBLAS_STATUS_SUCCESS) {
        mlt_complain("cublasLtMatmul", why ? why : "D laid out unlike C");
        return st;
    }
    return mock_cuda_enqueue((CUstream)stream, mlt_run, &p, sizeof p) == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                                                                                      : CUBLAS_STATUS_EXECUTION_FAILED;
}
