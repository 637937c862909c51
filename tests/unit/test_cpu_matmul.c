/* test_cpu_matmul.c - a matmul shared out over threads (cpu_gemm_batch on a
 * crew) gives the bits of the same product on one thread, bit for bit, over
 * a sweep of shapes: odd sizes, a few rows, all four transpositions, K past
 * one BLAS block, and the products fashion_mlp, fashion_cnn, char_lm and
 * gpt2-small train with (gpt2's with fewer rows). A BLAS whose row blocks a cut breaks up computes
 * the rows of the cut differently (OpenBLAS on Zen: blocks of 12 rows), so
 * slabs cut at the wrong rows fail here. Shapes with the work for several
 * slabs must in fact be split, or the sweep would prove nothing. The
 * split's gates (a serial or threaded BLAS, the load average) are checked
 * with what they see pretended (cpu_split_pretend). */
#include "cpu_crew.h"
#include "cpu_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

typedef struct shape {
    int64_t batch, M, N, K;
    int t;                       /* the transposition trained with (1: ta, 2: tb); a big shape runs only that */
    const char *what;
} shape;

static const shape shapes[] = {
    {1, 37, 301, 499, 0, "odd sizes"},
    {1, 25, 1000, 200, 0, "two blocks of 12 and one row"},
    {1, 100, 100, 1000, 0, "K past a block"},
    {1, 257, 129, 513, 0, "odd sizes, 3 slabs"},
    {1, 1001, 7, 333, 0, "thin"},
    {1, 13, 4000, 100, 0, "one row past a block"},
    {1, 128, 1024, 784, 0, "fashion_mlp fc1"},
    {1, 128, 1024, 1024, 2, "fashion_mlp fc2's dx"},
    {1, 784, 1024, 128, 1, "fashion_mlp fc1's dW"},
    {1, 100352, 32, 9, 0, "fashion_cnn conv1 (im2col rows)"},
    {1, 25088, 64, 288, 0, "fashion_cnn conv2"},
    {1, 288, 64, 25088, 1, "fashion_cnn conv2's dW"},
    {1, 128, 128, 3136, 0, "fashion_cnn fc1"},
    {1, 3136, 128, 128, 1, "fashion_cnn fc1's dW"},
    {1, 2048, 384, 128, 0, "char_lm qkv"},
    {1, 2048, 256, 128, 0, "char_lm head"},
    {1, 128, 2304, 768, 0, "gpt2-small qkv"},
    {1, 128, 768, 3072, 0, "gpt2-small mlp down"},
    {1, 24, 50257, 768, 2, "gpt2-small head (tied), a few rows"},
    {4, 64, 64, 600, 0, "a batch of products side by side"},
    {48, 28, 32, 9, 0, "a batch of small products"},
};

/* Values whose products and sums round in every way. */
static void fill(float *x, int64_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        x[i] = (float)(s % 2000003) / 1000001.0f - 1.0f;
    }
}

/* One shape, one transposition, on a crew: the single thread's bits. */
static void check(cpu_crew *crew, const shape *s, bool ta, bool tb, bool b_shared)
{
    int64_t ab = s->batch * s->M * s->K, bb = (b_shared ? 1 : s->batch) * s->K * s->N, cb = s->batch * s->M * s->N;
    float *A = malloc((size_t)ab * sizeof *A), *B = malloc((size_t)bb * sizeof *B);
    float *one = malloc((size_t)cb * sizeof *one), *many = malloc((size_t)cb * sizeof *many);
    fill(A, ab, (uint32_t)(s->M * 7 + s->K)), fill(B, bb, (uint32_t)(s->N * 3 + s->K));
    memset(many, 0xff, (size_t)cb * sizeof *many);   /* a slab left out stays NaN */
    cpu_gemm_batch(NULL, ta, tb, s->batch, s->M, s->N, s->K, A, B, b_shared, one);
    int64_t tiles = cpu_gemm_batch(crew, ta, tb, s->batch, s->M, s->N, s->K, A, B, b_shared, many);
    int threads = cpu_crew_size(crew);
    int64_t i = 0;
    while (i < cb && memcmp(&one[i], &many[i], sizeof *one) == 0) i++;
    if (i < cb) {
        printf("FAIL %s (batch %lld, M %lld, N %lld, K %lld, ta %d, tb %d) on %d threads, %lld tiles: element "
               "%lld (row %lld) is %.9g, on one thread %.9g\n",
               s->what, (long long)s->batch, (long long)s->M, (long long)s->N, (long long)s->K, ta, tb, threads,
               (long long)tiles, (long long)i, (long long)(i / s->N), many[i], one[i]);
        failures++;
    }
    /* enough work for two slabs of at least split_rows rows: it must be split */
    int al = cpu_gemm_split_rows();
    bool splits = al && (s->batch > 1 || s->M >= 2 * al) && s->batch * s->M * s->N * s->K >= (int64_t)1 << 23;
    if (splits && tiles < 2) {
        printf("FAIL %s (M %lld) on %d threads: ran on one thread\n", s->what, (long long)s->M, threads);
        failures++;
    }
    free(A), free(B), free(one), free(many);
}

/* A serial OpenBLAS (not safe to call from two threads) or a BLAS on
 * threads of its own is never called from a crew: no row count to split
 * at, a product that would be split runs whole on the calling thread, and
 * no kernel gets a crew (cpu_split_crew), whatever the load. */
static cpu_crew *given_crew(void *run) { return run; }

static void check_guards(cpu_crew *crew)
{
    static const cpu_blas_kind kinds[] = {CPU_BLAS_SERIAL, CPU_BLAS_THREADED};
    const shape *s = &shapes[3];   /* odd sizes, 3 slabs */
    float *A = calloc((size_t)(s->M * s->K), sizeof *A), *B = calloc((size_t)(s->K * s->N), sizeof *B);
    float *C = malloc((size_t)(s->M * s->N) * sizeof *C);
    cpu_op_ctx c = {.crew = given_crew, .run = crew};
    for (int i = 0; i < (int)NC_COUNT(kinds); i++) {
        cpu_split_pretend(0, kinds[i]);
        int64_t tiles = cpu_gemm_batch(crew, false, false, 1, s->M, s->N, s->K, A, B, true, C);
        if (cpu_gemm_split_rows() != 0 || tiles != 1 || cpu_split_crew(&c, 1e12)) {
            printf("FAIL blas kind %d: split at %d rows, %lld tiles, a crew %s\n", (int)kinds[i],
                   cpu_gemm_split_rows(), (long long)tiles, cpu_split_crew(&c, 1e12) ? "given" : "refused");
            failures++;
        }
    }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
    free(A), free(B), free(C);
}

/* The load gate of cpu_split_crew: a crew while the 1-minute load average
 * is under its threads, none from there up, none for too little work. */
static void check_load_gate(cpu_crew *crew)
{
    int threads = cpu_crew_size(crew);
    const struct { double load, work; bool crew; } cases[] = {
        {0, 1e9, true}, {threads - 0.01, 1e9, true}, {threads, 1e9, false}, {threads + 7.5, 1e9, false},
        {0, 1e5, false},
    };
    cpu_op_ctx c = {.crew = given_crew, .run = crew};
    for (int i = 0; i < (int)NC_COUNT(cases); i++) {
        cpu_split_pretend(cases[i].load, CPU_BLAS_REAL);
        bool got = cpu_split_crew(&c, cases[i].work) != NULL, want = cases[i].crew && cpu_gemm_split_rows() > 0;
        if (got != want) {
            printf("FAIL load %g on %d threads, %g multiply-adds: a crew %s\n", cases[i].load, threads,
                   cases[i].work, got ? "given" : "refused");
            failures++;
        }
    }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
}

int main(void)
{
    int al = cpu_gemm_split_rows();
    printf("test_cpu_matmul: slabs begin at multiples of %d rows\n", al);
    if (cpu_blas_threads() == 1 && al == 0) {
        printf("FAIL no row count kept the bits: matmuls are never split\n");
        failures++;
    }
    static const int counts[] = {2, 3};
    for (int c = 0; c < (int)NC_COUNT(counts); c++) {
        cpu_crew *crew = cpu_crew_new(counts[c]);
        if (!crew) {
            printf("FAIL no crew of %d threads\n", counts[c]);
            return 1;
        }
        for (int i = 0; i < (int)NC_COUNT(shapes); i++)
            for (int t = 0; t < 4; t++) {
                /* the big ones in the layout they are trained in (the build without BLAS
                   multiplies slowly), the rest in all four */
                const shape *s = &shapes[i];
                if (s->batch * s->M * s->N * s->K > ((int64_t)1 << 26) && t != s->t) continue;
                check(crew, s, t & 1, t & 2, s->batch == 1 || t == 3);
            }
        check_guards(crew);
        check_load_gate(crew);
        cpu_crew_free(crew);
    }
    if (failures) {
        printf("test_cpu_matmul: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cpu_matmul: ok\n");
    return 0;
}
