/* test_mock_cublaslt.c - the mock cuBLASLt (mock_cublaslt.c, linked in)
 * against products worked out here from the logical matrices, stored
 * column-major the way cuBLASLt reads them; and the calls it must refuse.
 * The two functions the mock driver offers it (mock_cuda.h) are stood in for
 * below: device memory is a table of blocks, and queued work runs at once or
 * is held, as a graph capture holds it. Exits 0 when all pass, 1 otherwise;
 * the refusals print the mock's messages on stderr. */
#include "mock_cuda.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"   /* cublasLt.h: cublasLtLoggerForceDisable() */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            failures++;                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                         \
            fputc('\n', stderr);                                  \
        }                                                         \
    } while (0)

/* ---- the mock driver's part ---------------------------------------------- */

enum { MAX_BLOCKS = 64 };
static struct { char *p; size_t bytes; } blocks[MAX_BLOCKS];
static int nblocks, kept;   /* blocks below kept (the workspace) outlive the tests */
static bool holding;   /* as a capturing stream: keep the work, run it later */
static struct { mock_work_fn *run; void *ctx; } held;

bool mock_cuda_fault(const char *call)
{
    (void)call;
    return false;
}

bool mock_cuda_in_device_memory(const void *p, size_t bytes)
{
    const char *c = p;
    for (int i = 0; i < nblocks; i++)
        if (c >= blocks[i].p && (size_t)(c - blocks[i].p) <= blocks[i].bytes && bytes <= blocks[i].bytes - (size_t)(c - blocks[i].p))
            return true;
    return false;
}

CUresult mock_cuda_enqueue(CUstream stream, mock_work_fn *run, const void *ctx, size_t ctx_bytes)
{
    (void)stream;   /* one stream: the order of calls is the order of work */
    void *copy = malloc(ctx_bytes);
    if (!copy) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, ctx, ctx_bytes);
    if (holding) {
        free(held.ctx);
        held.run = run, held.ctx = copy;
        return CUDA_SUCCESS;
    }
    run(copy);
    free(copy);
    return CUDA_SUCCESS;
}

/* Fresh device memory holds 0xff bytes, NaN in every float type, as the mock driver's. */
static void *dev_alloc(size_t bytes)
{
    size_t rounded = (bytes + 255) / 256 * 256;
    char *p = aligned_alloc(256, rounded);
    if (!p || nblocks == MAX_BLOCKS) abort();
    memset(p, 0xff, rounded);
    blocks[nblocks].p = p, blocks[nblocks].bytes = bytes;
    nblocks++;
    return p;
}

static void dev_free_all(void)
{
    while (nblocks > kept) free(blocks[--nblocks].p);
}

/* ---- numbers --------------------------------------------------------------- */

static size_t elem_bytes(cudaDataType_t t)
{
    return t == CUDA_R_32F ? 4 : 2;
}

/* Only values the type holds exactly are stored (small integers, quarters). */
static void put(void *base, cudaDataType_t t, size_t idx, double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (t == CUDA_R_32F) {
        memcpy((char *)base + idx * 4, &f, 4);
        return;
    }
    uint32_t ax = u & 0x7fffffffu;
    uint16_t f16 = (uint16_t)(((u >> 16) & 0x8000u) | (ax ? (((ax >> 23) - 112) << 10) | ((ax >> 13) & 0x3ffu) : 0));
    uint16_t h = t == CUDA_R_16BF ? (uint16_t)(u >> 16) : f16;
    memcpy((char *)base + idx * 2, &h, 2);
}

static uint16_t bits16(const void *base, size_t idx)
{
    uint16_t h;
    memcpy(&h, (const char *)base + idx * 2, 2);
    return h;
}

static double get(const void *base, cudaDataType_t t, size_t idx)
{
    if (t == CUDA_R_32F) {
        float f;
        memcpy(&f, (const char *)base + idx * 4, 4);
        return f;
    }
    uint16_t h = bits16(base, idx);
    if (t == CUDA_R_16BF) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static double gelu(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x, double h)
{
    return (gelu(x + h) - gelu(x - h)) / (2 * h);   /* a central difference: independent of the mock's formula */
}

/* ---- descriptors ------------------------------------------------------------- */

static cublasLtHandle_t handle;
static void *workspace;
static const size_t workspace_bytes = 1 << 16;

typedef struct lt {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo;
} lt;

static void lt_make(lt *x, cudaDataType_t ab, cudaDataType_t cd, uint64_t ar, uint64_t ac, uint64_t br, uint64_t bc,
                    uint64_t dr, uint64_t dc, int pad)
{
    memset(x, 0, sizeof *x);
    cublasLtMatmulDescCreate(&x->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&x->a, ab, ar, ac, (int64_t)ar + pad);
    cublasLtMatrixLayoutCreate(&x->b, ab, br, bc, (int64_t)br + pad);
    cublasLtMatrixLayoutCreate(&x->c, cd, dr, dc, (int64_t)dr + pad);
    cublasLtMatrixLayoutCreate(&x->d, cd, dr, dc, (int64_t)dr + pad);
}

static void lt_free(lt *x)
{
    cublasLtMatmulDescDestroy(x->desc);
    cublasLtMatrixLayoutDestroy(x->a);
    cublasLtMatrixLayoutDestroy(x->b);
    cublasLtMatrixLayoutDestroy(x->c);
    cublasLtMatrixLayoutDestroy(x->d);
}

static void lt_trans(lt *x, bool ta, bool tb)
{
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
}

static void lt_batch(cublasLtMatrixLayout_t l, int32_t batch, int64_t stride)
{
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
}

/* The heuristic as gpu.c asks it: the workspace as the only preference. */
static cublasStatus_t lt_heuristic_aligned(lt *x, int *found, uint32_t align)
{
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t max_ws = workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    if (align) cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align);
    cublasLtMatmulHeuristicResult_t h;
    *found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, x->desc, x->a, x->b, x->c, x->d, pref, 1, &h, found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && *found) x->algo = h.algo;
    return st;
}

static cublasStatus_t lt_heuristic(lt *x, int *found)
{
    return lt_heuristic_aligned(x, found, 0);
}

static cublasStatus_t lt_run(lt *x, float alpha, float beta, const void *A, const void *B, const void *C, void *D)
{
    return cublasLtMatmul(handle, x->desc, &alpha, A, x->a, B, x->b, &beta, C, x->c, D, x->d, &x->algo, workspace,
                          workspace_bytes, NULL);
}

/* ---- hand-written products ------------------------------------------------------ */

/* A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12], AB = [58 64; 139 154], column-major. */
static void test_literal(bool ta, bool tb)
{
    const float a_n[] = {1, 4, 2, 5, 3, 6}, a_t[] = {1, 2, 3, 4, 5, 6};
    const float b_n[] = {7, 9, 11, 8, 10, 12}, b_t[] = {7, 8, 9, 10, 11, 12};
    const float want[] = {58, 139, 64, 154};
    float *A = dev_alloc(sizeof a_n), *B = dev_alloc(sizeof b_n), *D = dev_alloc(sizeof want);
    memcpy(A, ta ? a_t : a_n, sizeof a_n);
    memcpy(B, tb ? b_t : b_n, sizeof b_n);
    lt x;
    lt_make(&x, CUDA_R_32F, CUDA_R_32F, ta ? 3 : 2, ta ? 2 : 3, tb ? 2 : 3, tb ? 3 : 2, 2, 2, 0);
    lt_trans(&x, ta, tb);
    int found;
    CHECK(lt_heuristic(&x, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "literal heuristic");
    CHECK(lt_run(&x, 1, 0, A, B, D, D) == CUBLAS_STATUS_SUCCESS, "literal matmul");
    for (int i = 0; i < 4; i++) CHECK(D[i] == want[i], "literal ta %d tb %d: D[%d] = %g, want %g", ta, tb, i, D[i], want[i]);
    lt_free(&x);
    dev_free_all();
}

/* A product over logical matrices of small values, stored as cuBLASLt reads
 * them: op(A) m x k, op(B) k x n, every leading dimension pad rows longer
 * (the padding holds NaN: read, it would show). */
typedef struct mm {
    const char *what;
    cudaDataType_t ab, cd;
    int m, n, k, batch, pad;
    bool ta, tb, a_shared;
    cublasLtEpilogue_t epi;
    float alpha, beta;
    double scale, tol;
} mm;

static double va(const mm *t, int b, int i, int l)
{
    return t->scale * (((i * 3 + l * 5 + (t->a_shared ? 0 : b) * 7) % 7) - 3);
}

static double vb(const mm *t, int b, int l, int j)
{
    return t->scale * (((l * 2 + j * 3 + b * 5) % 5) - 2);
}

static double vc(int b, int i, int j) { return ((i + 2 * j + b) % 4) - 1.5; }
static double vbias(int i) { return 0.5 * (i % 3) - 0.5; }
static double vaux(int b, int i, int j) { return 0.25 * (((i * 5 + j * 3 + b) % 9) - 4); }

/* What D(i, j) of batch b must be; *pre: the value before the activation. */
static double mm_expect(const mm *t, int b, int i, int j, double *pre)
{
    double acc = 0;
    for (int l = 0; l < t->k; l++) acc += va(t, b, i, l) * vb(t, b, l, j);
    double x = t->alpha * acc + (t->beta != 0 ? t->beta * vc(b, i, j) : 0);
    if (t->epi & CUBLASLT_EPILOGUE_BIAS) x += vbias(i);
    *pre = x;
    if (t->epi == CUBLASLT_EPILOGUE_DGELU || t->epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) return x * gelu_grad(vaux(b, i, j), 1e-4);
    if (t->epi & CUBLASLT_EPILOGUE_GELU) return gelu(x);
    if (t->epi & CUBLASLT_EPILOGUE_RELU) return x < 0 ? 0 : x;
    return x;
}

typedef struct mm_bufs {
    void *a, *b, *c, *d, *bias, *aux;
    int64_t lda, ldb, ldd, sa, sb, sd, ld_aux, s_aux;
} mm_bufs;

static void mm_fill(const mm *t, mm_bufs *m)
{
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k, br = t->tb ? t->n : t->k, bc = t->tb ? t->k : t->n;
    m->lda = ar + t->pad, m->ldb = br + t->pad, m->ldd = t->m + t->pad;
    m->sa = t->a_shared ? 0 : m->lda * ac, m->sb = m->ldb * bc, m->sd = m->ldd * t->n;
    m->ld_aux = (t->m + 7) / 8 * 8, m->s_aux = m->ld_aux * t->n;
    size_t e = elem_bytes(t->ab), f = elem_bytes(t->cd);
    m->a = dev_alloc(e * (size_t)(t->a_shared ? m->lda * ac : m->sa * t->batch));
    m->b = dev_alloc(e * (size_t)(m->sb * t->batch));
    m->d = dev_alloc(f * (size_t)(m->sd * t->batch));
    m->c = t->beta != 0 ? dev_alloc(f * (size_t)(m->sd * t->batch)) : m->d;
    m->bias = dev_alloc(f * (size_t)t->m);
    m->aux = dev_alloc(f * (size_t)(m->s_aux * t->batch));
    for (int b = 0; b < t->batch; b++)
        for (int i = 0; i < t->m; i++) {
            for (int l = 0; l < t->k; l++)
                put(m->a, t->ab, (size_t)(b * m->sa + (t->ta ? l + i * m->lda : i + l * m->lda)), va(t, b, i, l));
            for (int j = 0; j < t->n; j++) {
                if (t->beta != 0) put(m->c, t->cd, (size_t)(b * m->sd + i + j * m->ldd), vc(b, i, j));
                put(m->aux, t->cd, (size_t)(b * m->s_aux + i + j * m->ld_aux), vaux(b, i, j));
            }
        }
    for (int b = 0; b < t->batch; b++)
        for (int l = 0; l < t->k; l++)
            for (int j = 0; j < t->n; j++)
                put(m->b, t->ab, (size_t)(b * m->sb + (t->tb ? j + l * m->ldb : l + j * m->ldb)), vb(t, b, l, j));
    for (int i = 0; i < t->m; i++) put(m->bias, t->cd, (size_t)i, vbias(i));
}

static void mm_describe(const mm *t, const mm_bufs *m, lt *x)
{
    lt_make(x, t->ab, t->cd, t->ta ? t->k : t->m, t->ta ? t->m : t->k, t->tb ? t->n : t->k, t->tb ? t->k : t->n, t->m, t->n,
            t->pad);
    lt_trans(x, t->ta, t->tb);
    uint32_t epi = t->epi;
    cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &m->bias, sizeof m->bias);
    cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &m->aux, sizeof m->aux);
    cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &m->ld_aux, sizeof m->ld_aux);
    if (t->batch > 1) {
        cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &m->s_aux, sizeof m->s_aux);
        lt_batch(x->a, t->batch, m->sa);
        lt_batch(x->b, t->batch, m->sb);
        lt_batch(x->c, t->batch, m->sd);
        lt_batch(x->d, t->batch, m->sd);
    }
}

static void mm_compare(const mm *t, const mm_bufs *m)
{
    bool aux_out = (t->epi & 128) && t->epi != CUBLASLT_EPILOGUE_DGELU && t->epi != CUBLASLT_EPILOGUE_DGELU_BGRAD;
    for (int i = 0; t->epi == CUBLASLT_EPILOGUE_DGELU_BGRAD && i < t->m; i++) {   /* the bias gradient: D's rows summed */
        double sum = 0;
        for (int j = 0; j < t->n; j++) sum += get(m->d, t->cd, (size_t)(i + j * m->ldd));
        double got = get(m->bias, t->cd, (size_t)i);
        CHECK(fabs(got - sum) <= (elem_bytes(t->cd) == 4 ? 1e-6 : 1e-2) * (1 + fabs(sum)), "%s: bias gradient [%d] = %.9g, want %.9g",
              t->what, i, got, sum);
    }
    for (int b = 0; b < t->batch; b++)
        for (int j = 0; j < t->n; j++) {
            for (int i = 0; i < t->m; i++) {
                double pre, want = mm_expect(t, b, i, j, &pre), got = get(m->d, t->cd, (size_t)(b * m->sd + i + j * m->ldd));
                CHECK(fabs(got - want) <= t->tol * (1 + fabs(want)), "%s: D[%d](%d,%d) = %.9g, want %.9g", t->what, b, i, j, got,
                      want);
                double aux = aux_out ? get(m->aux, t->cd, (size_t)(b * m->s_aux + i + j * m->ld_aux)) : pre;
                CHECK(aux == pre, "%s: aux[%d](%d,%d) = %.9g, want the GELU input %.9g", t->what, b, i, j, aux, pre);
            }
            for (int i = t->m; i < m->ldd; i++)   /* the padding is never written */
                CHECK(elem_bytes(t->cd) == 4 ? isnan(get(m->d, t->cd, (size_t)(b * m->sd + i + j * m->ldd)))
                                             : bits16(m->d, (size_t)(b * m->sd + i + j * m->ldd)) == 0xffff,
                      "%s: D's padding row %d was written", t->what, i);
        }
}

static void run_mm(const mm *t)
{
    mm_bufs m;
    lt x;
    mm_fill(t, &m);
    mm_describe(t, &m, &x);
    int found;
    cublasStatus_t st = lt_heuristic(&x, &found);
    CHECK(st == CUBLAS_STATUS_SUCCESS && found == 1, "%s: heuristic status %d, found %d", t->what, (int)st, found);
    st = lt_run(&x, t->alpha, t->beta, m.a, m.b, m.c, m.d);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "%s: matmul status %d", t->what, (int)st);
    if (st == CUBLAS_STATUS_SUCCESS) mm_compare(t, &m);
    lt_free(&x);
    dev_free_all();
}

static mm mm_default(const char *what)
{
    return (mm){.what = what, .ab = CUDA_R_32F, .cd = CUDA_R_32F, .m = 5, .n = 3, .k = 4, .batch = 1, .pad = 2,
                .epi = CUBLASLT_EPILOGUE_DEFAULT, .alpha = 1, .beta = 0, .scale = 1, .tol = 0};
}

static void test_transposes(void)
{
    const char *names[] = {"f32 NN", "f32 TN", "f32 NT", "f32 TT"};
    for (int c = 0; c < 4; c++) {
        mm t = mm_default(names[c]);
        t.ta = c & 1, t.tb = c & 2;
        run_mm(&t);
    }
}

static void test_batches(void)
{
    mm t = mm_default("batch 3, A shared (stride 0)");
    t.m = 4, t.n = 3, t.k = 5, t.batch = 3, t.pad = 1, t.a_shared = true, t.tb = true;
    run_mm(&t);
    t = mm_default("batch 2, beta 1, alpha 2");
    t.batch = 2, t.beta = 1, t.alpha = 2, t.ta = true;
    run_mm(&t);
    t = mm_default("large enough for the mock's threads");
    t.m = 96, t.n = 41, t.k = 1100, t.batch = 2, t.pad = 3, t.tb = true, t.beta = 1;
    run_mm(&t);
}

static void test_types(void)
{
    const cudaDataType_t ab[] = {CUDA_R_16BF, CUDA_R_16F, CUDA_R_16BF, CUDA_R_16F};
    const cudaDataType_t cd[] = {CUDA_R_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F};
    const char *names[] = {"bf16 -> f32", "f16 -> f32", "bf16 -> bf16", "f16 -> f16"};
    for (int c = 0; c < 4; c++) {
        mm t = mm_default(names[c]);
        t.ab = ab[c], t.cd = cd[c], t.m = 6, t.n = 5, t.k = 7, t.ta = c & 1;
        run_mm(&t);
    }
}

static void test_epilogues(void)
{
    const cublasLtEpilogue_t epi[] = {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU_BIAS,
                                      CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX,
                                      CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU};
    const char *names[] = {"bias", "relu", "relu + bias", "gelu", "gelu + bias", "gelu aux", "gelu aux + bias", "dgelu"};
    for (int c = 0; c < 8; c++) {
        mm t = mm_default(names[c]);
        t.epi = epi[c], t.m = 6, t.n = 4, t.k = 3, t.scale = 0.25, t.tol = c >= 3 ? 1e-6 : 0, t.ta = c & 1;
        run_mm(&t);
    }
    mm t = mm_default("gelu aux + bias, bf16");
    t.ab = t.cd = CUDA_R_16BF, t.m = 9, t.n = 3, t.k = 2, t.scale = 0.25, t.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, t.tol = 1e-2;
    run_mm(&t);
    t = mm_default("dgelu + bias gradient");
    t.epi = CUBLASLT_EPILOGUE_DGELU_BGRAD, t.m = 6, t.n = 5, t.k = 3, t.scale = 0.25, t.tol = 1e-6, t.tb = true;
    run_mm(&t);
    t = mm_default("dgelu + bias gradient, bf16");
    t.ab = t.cd = CUDA_R_16BF, t.m = 16, t.n = 7, t.k = 4, t.scale = 0.25, t.epi = CUBLASLT_EPILOGUE_DGELU_BGRAD, t.tol = 1e-2;
    run_mm(&t);
}

/* beta 1 reads C; beta 0 must not read C (gpu.c passes D, full of NaN, as C). */
static void test_beta(void)
{
    mm t = mm_default("beta 1 with C");
    t.beta = 1;
    run_mm(&t);
    t = mm_default("beta 0, C holds NaN");
    run_mm(&t);
    /* in place: C == D, the same layout */
    float *A = dev_alloc(4 * 6), *B = dev_alloc(4 * 6), *CD = dev_alloc(4 * 4);
    for (int i = 0; i < 6; i++) A[i] = (float)(i + 1), B[i] = (float)(i + 7);
    for (int i = 0; i < 4; i++) CD[i] = 1000;
    lt x;
    lt_make(&x, CUDA_R_32F, CUDA_R_32F, 2, 3, 3, 2, 2, 2, 0);
    int found;
    lt_heuristic(&x, &found);
    CHECK(lt_run(&x, 1, 1, A, B, CD, CD) == CUBLAS_STATUS_SUCCESS, "in place");
    const float want[] = {1076, 1100, 1103, 1136};   /* A = [1 3 5; 2 4 6], B = [7 10; 8 11; 9 12] */
    for (int i = 0; i < 4; i++) CHECK(CD[i] == want[i], "in place: D[%d] = %g, want %g", i, CD[i], want[i]);
    lt_free(&x);
    dev_free_all();
}

/* ---- rounding to 16-bit outputs ---------------------------------------------------- */

static uint16_t product16(cudaDataType_t t, float alpha)
{
    void *A = dev_alloc(2), *B = dev_alloc(2), *D = dev_alloc(2);
    put(A, t, 0, 1);
    put(B, t, 0, 1);
    lt x;
    lt_make(&x, t, t, 1, 1, 1, 1, 1, 1, 0);
    int found;
    lt_heuristic(&x, &found);
    cublasStatus_t st = lt_run(&x, alpha, 0, A, B, D, D);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "1x1 product in type %d: status %d", (int)t, (int)st);
    uint16_t h = bits16(D, 0);
    lt_free(&x);
    dev_free_all();
    return h;
}

static void test_rounding(void)
{
    struct { cudaDataType_t t; float alpha; uint16_t want; } c[] = {
        {CUDA_R_16BF, 1 + 0x1p-8f, 0x3f80},        /* a tie: to even, down */
        {CUDA_R_16BF, 1 + 3 * 0x1p-8f, 0x3f82},    /* a tie: to even, up */
        {CUDA_R_16BF, 1 + 0x1.8p-8f, 0x3f81},      /* above the tie */
        {CUDA_R_16BF, -2.0f, 0xc000},
        {CUDA_R_16F, 1 + 0x1p-11f, 0x3c00},
        {CUDA_R_16F, 1 + 3 * 0x1p-11f, 0x3c02},
        {CUDA_R_16F, 65519.0f, 0x7bff},             /* the largest f16, 65504 */
        {CUDA_R_16F, 65520.0f, 0x7c00},             /* rounds to Inf */
        {CUDA_R_16F, 0x1p-25f, 0x0000},             /* half the smallest subnormal: a tie, to 0 */
        {CUDA_R_16F, 0x1.8p-24f, 0x0002},           /* 1.5 subnormal units: a tie, to 2 */
        {CUDA_R_16F, -0x1p-14f, 0x8400},            /* the smallest normal */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint16_t got = product16(c[i].t, c[i].alpha);
        CHECK(got == c[i].want, "%s of %a: 0x%04x, want 0x%04x", c[i].t == CUDA_R_16F ? "f16" : "bf16", (double)c[i].alpha, got,
              c[i].want);
    }
    uint16_t nan_bf16 = product16(CUDA_R_16BF, NAN), nan_f16 = product16(CUDA_R_16F, NAN);
    CHECK((nan_bf16 & 0x7f80) == 0x7f80 && (nan_bf16 & 0x7f), "bf16 NaN became 0x%04x", nan_bf16);
    CHECK((nan_f16 & 0x7c00) == 0x7c00 && (nan_f16 & 0x3ff), "f16 NaN became 0x%04x", nan_f16);
}

/* ---- what a graph capture sees ------------------------------------------------------- */

/* The work is held, then run twice after the caller's alpha and descriptors are gone. */
static void test_held(void)
{
    float *A = dev_alloc(4 * 6), *B = dev_alloc(4 * 6), *D = dev_alloc(4 * 4);
    for (int i = 0; i < 6; i++) A[i] = (float)(i + 1), B[i] = (float)(i + 7);
    lt x;
    lt_make(&x, CUDA_R_32F, CUDA_R_32F, 2, 3, 3, 2, 2, 2, 0);
    int found;
    lt_heuristic(&x, &found);
    holding = true;
    float alpha = 2, beta = 0;
    cublasStatus_t st = cublasLtMatmul(handle, x.desc, &alpha, A, x.a, B, x.b, &beta, D, x.c, D, x.d, &x.algo, workspace,
                                       workspace_bytes, NULL);
    holding = false;
    alpha = 100;
    cublasOperation_t t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    lt_free(&x);
    CHECK(st == CUBLAS_STATUS_SUCCESS && held.run, "held matmul: status %d", (int)st);
    CHECK(isnan(D[0]), "the held matmul ran before its launch");
    const float want[] = {152, 200, 206, 272};   /* 2 AB, A and B as in test_beta */
    for (int launch = 0; launch < 2 && held.run; launch++) {
        memset(D, 0xff, 16);
        held.run(held.ctx);
        for (int i = 0; i < 4; i++) CHECK(D[i] == want[i], "held launch %d: D[%d] = %g, want %g", launch, i, D[i], want[i]);
    }
    free(held.ctx);
    held.ctx = NULL, held.run = NULL;
    dev_free_all();
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* A plain 2x3 times 3x2 f32 product, ready for one thing to be spoiled. */
typedef struct small {
    lt x;
    float *A, *B, *D;
} small;

static void small_make(small *s)
{
    s->A = dev_alloc(4 * 6), s->B = dev_alloc(4 * 6), s->D = dev_alloc(4 * 4);
    for (int i = 0; i < 6; i++) s->A[i] = 1, s->B[i] = 1;
    lt_make(&s->x, CUDA_R_32F, CUDA_R_32F, 2, 3, 3, 2, 2, 2, 0);
}

static void small_free(small *s)
{
    lt_free(&s->x);
    dev_free_all();
}

static void test_refused_memory(void)
{
    small s;
    small_make(&s);
    int found;
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "small heuristic");
    float *short_d = dev_alloc(4 * 3), host_b[6] = {0};
    CHECK(lt_run(&s.x, 1, 0, s.A, s.B, s.D, short_d) == CUBLAS_STATUS_INVALID_VALUE, "a D one element short was taken");
    CHECK(isnan(short_d[0]), "the refused matmul wrote D");
    CHECK(lt_run(&s.x, 1, 0, s.A, host_b, s.D, s.D) == CUBLAS_STATUS_INVALID_VALUE, "B in host memory was taken");
    CHECK(lt_run(&s.x, 1, 0, s.A, s.B, s.A, s.A) == CUBLAS_STATUS_INVALID_VALUE, "D over A was taken");
    CHECK(cublasLtMatmul(handle, s.x.desc, &(float){1}, s.A, s.x.a, s.B, s.x.b, &(float){0}, s.D, s.x.c, s.D, s.x.d, &s.x.algo,
                         (char *)workspace + 64, 1024, NULL) == CUBLAS_STATUS_INVALID_VALUE,
          "a workspace not 256-byte aligned was taken");
    /* 4-byte aligned A: refused by an algorithm found for the default 256 bytes, taken by one found for 4 */
    float *A4 = (float *)dev_alloc(4 * 7) + 1;
    for (int i = 0; i < 6; i++) A4[i] = 1;
    CHECK(lt_run(&s.x, 1, 0, A4, s.B, s.D, s.D) == CUBLAS_STATUS_NOT_SUPPORTED, "A aligned to 4 bytes was taken");
    CHECK(lt_heuristic_aligned(&s.x, &found, 4) == CUBLAS_STATUS_SUCCESS, "heuristic with alignment 4");
    CHECK(lt_run(&s.x, 1, 0, A4, s.B, s.D, s.D) == CUBLAS_STATUS_SUCCESS && s.D[0] == 3, "A aligned to 4 bytes, algorithm for 4");
    cublasLtMatmulAlgo_t zero = {{0}};
    CHECK(cublasLtMatmul(handle, s.x.desc, &(float){1}, s.A, s.x.a, s.B, s.x.b, &(float){0}, s.D, s.x.c, s.D, s.x.d, &zero,
                         workspace, workspace_bytes, NULL) == CUBLAS_STATUS_INVALID_VALUE,
          "an algorithm of zeros was taken");
    small_free(&s);
}

static void test_refused_types(void)
{
    lt x;
    int found = -1;
    lt_make(&x, CUDA_R_32F, CUDA_R_16BF, 2, 3, 3, 2, 2, 2, 0);
    cublasStatus_t st = lt_heuristic(&x, &found);
    CHECK(st == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "f32 A/B -> bf16 D: heuristic status %d, found %d", (int)st, found);
    lt_free(&x);
    lt_make(&x, CUDA_R_16BF, CUDA_R_16F, 2, 3, 3, 2, 2, 2, 0);
    CHECK(lt_heuristic(&x, &found) == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "bf16 A/B -> f16 D was taken");
    lt_free(&x);
}

static void test_refused_layouts(void)
{
    small s;
    small_make(&s);
    int found;
    lt_batch(s.x.a, 2, 6);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_INVALID_VALUE && found == 0, "batch counts 2, 1, 1, 1 were taken");
    lt_batch(s.x.a, 1, 0);
    int32_t row = CUBLASLT_ORDER_ROW;
    cublasLtMatrixLayoutSetAttribute(s.x.b, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_NOT_SUPPORTED, "a row-major B was taken");
    small_free(&s);
    small_make(&s);
    lt_trans(&s.x, true, false);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_INVALID_VALUE, "op(A) 3x2 times B 3x2 was taken");
    small_free(&s);
    small_make(&s);
    int64_t ld = 1;
    cublasLtMatrixLayoutSetAttribute(s.x.d, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_INVALID_VALUE, "a leading dimension below the rows was taken");
    small_free(&s);
}

static void test_refused_epilogues(void)
{
    small s;
    small_make(&s);
    int found;
    uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_INVALID_VALUE, "a bias epilogue without a bias was taken");
    epi = CUBLASLT_EPILOGUE_GELU_AUX;
    void *aux = dev_alloc(4 * 16);
    int64_t ld = 2;   /* covers the rows, not a multiple of 8 */
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_INVALID_VALUE, "an aux leading dimension of 2 was taken");
    ld = 8;
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_SUCCESS, "an aux leading dimension of 8");
    epi = CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    CHECK(lt_run(&s.x, 1, 0, s.A, s.B, s.D, s.D) == CUBLAS_STATUS_INVALID_VALUE,
          "an algorithm found for GELU_AUX was taken for DEFAULT");
    epi = CUBLASLT_EPILOGUE_DRELU;
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_NOT_SUPPORTED, "DRELU (not modelled) was taken");
    /* DGELU_BGRAD writes its bias gradient through the bias pointer; and a
     * library without its kernel (NETC_MOCK_CUBLASLT_REFUSE) finds nothing */
    epi = CUBLASLT_EPILOGUE_DGELU_BGRAD;
    const void *no_bias = NULL, *sums = dev_alloc(4 * 16);
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &no_bias, sizeof no_bias);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_INVALID_VALUE, "DGELU_BGRAD without a place for the gradient was taken");
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &sums, sizeof sums);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_SUCCESS, "DGELU_BGRAD with its aux input and a bias gradient vector");
    setenv("NETC_MOCK_CUBLASLT_REFUSE", "4,208", 1);
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "a refused DGELU_BGRAD was found");
    unsetenv("NETC_MOCK_CUBLASLT_REFUSE");
    small_free(&s);
}

static void test_refused_attributes(void)
{
    small s;
    small_make(&s);
    int32_t op = CUBLAS_OP_T;
    int64_t wide = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide) ==
              CUBLAS_STATUS_INVALID_VALUE, "TRANSA as 8 bytes was taken");
    CHECK(cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op) == CUBLAS_STATUS_SUCCESS,
          "TRANSA as 4 bytes");
    op = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op);
    CHECK(cublasLtMatrixLayoutSetAttribute(s.x.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &wide, sizeof wide) ==
              CUBLAS_STATUS_INVALID_VALUE, "BATCH_COUNT as 8 bytes was taken");
    CHECK(cublasLtMatrixLayoutSetAttribute(s.x.a, (cublasLtMatrixLayoutAttribute_t)99, &op, sizeof op) ==
              CUBLAS_STATUS_INVALID_VALUE, "an unknown layout attribute was taken");
    int32_t bias_type = CUDA_R_16BF;
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    void *bias = dev_alloc(8);
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(s.x.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    int found;
    CHECK(lt_heuristic(&s.x, &found) == CUBLAS_STATUS_NOT_SUPPORTED, "a bf16 bias with an f32 D was taken");
    small_free(&s);
}

int main(void)
{
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
    workspace = dev_alloc(workspace_bytes);
    kept = nblocks;
    for (int c = 0; c < 4; c++) test_literal(c & 1, c & 2);
    test_transposes();
    test_batches();
    test_types();
    test_epilogues();
    test_beta();
    test_rounding();
    test_held();
    fprintf(stderr, "(refusals follow: the mock's messages are expected)\n");
    test_refused_memory();
    test_refused_types();
    test_refused_layouts();
    test_refused_epilogues();
    test_refused_attributes();
    kept = 0;
    dev_free_all();
    cublasLtDestroy(handle);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    else fprintf(stderr, "all passed\n");
    return failures ? 1 : 0;
}
