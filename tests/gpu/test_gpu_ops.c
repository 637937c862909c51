/* test_gpu_ops.c - every op of the table on the GPU against the CPU
 * executor, in each dtype it supports, on fresh random inputs.
 * Exits 77 (skipped) without a GPU. NETC_GPU_CASE=name runs one case. */
#include "gpu_check.h"
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_case {
    const char *name;
    const char *body;          /* the model, with T as the dtype placeholder */
    const char *dtypes;        /* which dtypes to run: "f32 bf16 f16" */
} op_case;

/* Shapes are odd on purpose: no size divides the block size. */
static const op_case cases[] = {
    {"neg", "model m(x: T[5, 37]) { return -x }", "f32 bf16 f16 i32"},
    {"abs", "model m(x: T[5, 37]) { return abs(x) }", "f32 bf16 f16 i32"},
    {"exp", "model m(x: T[5, 37]) { return exp(x) }", "f32 bf16 f16"},
    {"log", "model m(x: T[5, 37]) { return log(abs(x) + 0.25) }", "f32 bf16 f16"},
    {"sqrt", "model m(x: T[5, 37]) { return sqrt(abs(x)) }", "f32 bf16 f16"},
    {"rsqrt", "model m(x: T[5, 37]) { return rsqrt(abs(x) + 0.5) }", "f32 bf16 f16"},
    {"square", "model m(x: T[5, 37]) { return square(x) }", "f32 bf16 f16 i32"},
    {"tanh", "model m(x: T[5, 37]) { return tanh(x) }", "f32 bf16 f16"},
    {"sigmoid", "model m(x: T[5, 37]) { return sigmoid(x) }", "f32 bf16 f16"},
    {"relu", "model m(x: T[5, 37]) { return relu(x) }", "f32 bf16 f16 i32"},
    {"gelu", "model m(x: T[5, 37]) { return gelu(x) }", "f32 bf16 f16"},
    {"gelu_tanh", "model m(x: T[5, 37]) { return gelu_tanh(x) }", "f32 bf16 f16"},
    {"silu", "model m(x: T[5, 37]) { return silu(x) }", "f32 bf16 f16"},
    {"cast", "model m(x: T[5, 37]) { return bf16(x), f16(x), i32(x * 10), u8(abs(x) * 100), f32(x) }", "f32"},
    {"cast_up", "model m(x: T[5, 37]) { return f32(x) }", "bf16 f16"},
    {"dropout", "model m(x: T[5, 37]) { return dropout(x, p: 0.3, seed: 7) }", "f32 bf16"},
    {"add", "model m(x: T[5, 37], y: T[5, 37]) { return x + y }", "f32 bf16 f16 i32"},
    {"sub", "model m(x: T[5, 37], y: T[5, 37]) { return x - y }", "f32 bf16 f16 i32"},
    {"mul", "model m(x: T[5, 37], y: T[5, 37]) { return x * y }", "f32 bf16 f16 i32"},
    {"div", "model m(x: T[5, 37], y: T[5, 37]) { return x / y }", "f32 bf16 f16 i32"},
    {"pow", "model m(x: T[5, 37], y: T[5, 37]) { return pow(abs(x) + 0.5, y) }", "f32 bf16"},
    {"maximum", "model m(x: T[5, 37], y: T[5, 37]) { return maximum(x, y), minimum(x, y) }", "f32 bf16 f16 i32"},
    {"compare", "model m(x: T[5, 37], y: T[5, 37]) { return x == y, x != y, x < y, x <= y, x > y, x >= y }", "f32 bf16 i32"},
    {"where", "model m(x: T[5, 37], y: T[5, 37]) { return where(x > y, x, y * 2) }", "f32 bf16 f16 i32"},
    {"broadcast", "model m(x: T[5, 1, 37], y: T[4, 1]) { return x + y }", "f32 bf16 i32"},
    {"sum", "model m(x: T[6, 7, 37]) { return sum(x), sum(x, axis: -1), sum(x, axis: [0, 2], keepdim: true) }", "f32 bf16 i32"},
    {"mean", "model m(x: T[6, 7, 37]) { return mean(x, axis: 1), mean(x) }", "f32 bf16 f16"},
    {"max", "model m(x: T[6, 7, 37]) { return max(x, axis: -1), max(x, axis: [0, 1]) }", "f32 bf16 i32"},
    {"softmax", "model m(x: T[9, 333]) { return softmax(x * 3), log_softmax(x * 3) }", "f32 bf16 f16"},
    {"layernorm", "model m(x: T[9, 333], w: T[333], b: T[333]) { return layernorm(x, w, b, eps: 1e-5) }", "f32 bf16 f16"},
    {"rmsnorm", "model m(x: T[9, 333], w: T[333]) { return rmsnorm(x, w) }", "f32 bf16 f16"},
    {"cross_entropy", "model m(x: T[9, 13], t: i32[9]) { return cross_entropy(x, t), cross_entropy(x, t, smoothing: 0.1) }", "f32 bf16"},
    {"attention", "model m(q: T[2, 3, 37, 16], k: T[2, 3, 37, 16], v: T[2, 3, 37, 8]) { "
                  "return attention(q, k, v, causal: true), attention(q, k, v, scale: 0.2) }", "f32 bf16 f16"},
    /* heads of 64 and 128: the tensor-core kernels (a whole tile and a part;
     * a negative scale takes the path that scales scores before their max) */
    {"attention_tc", "model m(q: T[2, 2, 70, 64], k: T[2, 2, 70, 64], v: T[2, 2, 70, 64]) { "
                     "return attention(q, k, v, causal: true), attention(q, k, v, scale: 0.2), attention(q, k, v, scale: -0.2) }",
     "bf16 f16"},
    {"attention_tc128", "model m(q: T[1, 2, 70, 128], k: T[1, 2, 70, 128], v: T[1, 2, 70, 128]) { "
                        "return attention(q, k, v, causal: true), attention(q, k, v, scale: 0.1) }", "bf16 f16"},
    {"matmul", "model m(a: T[33, 65], b: T[65, 17]) { return a @ b }", "f32 bf16 f16"},
    {"matmul_t", "model m(a: T[65, 33], b: T[17, 65]) { return matmul(a, b, transpose_a: true, transpose_b: true) }", "f32 bf16 f16"},
    {"matmul_batch", "model m(a: T[3, 4, 33, 65], b: T[3, 4, 65, 17], w: T[65, 9]) { return a @ b, a @ w }", "f32 bf16"},
    /* cast hoisting: an f32 product of f16/bf16 values reads them narrow
     * (cuBLASLt stores f32 from them), and stores narrow when a cast back
     * reaches it through a transpose */
    {"matmul_wide", "model m(a: T[3, 33, 65], b: T[65, 17]) { return f32(a) @ f32(b) }", "bf16 f16"},
    {"matmul_narrowed", "model m(a: T[33, 65], b: T[65, 17]) { return T (transpose(f32(a) @ f32(b))) }", "bf16 f16"},
    {"transpose", "model m(x: T[3, 5, 7, 9]) { return transpose(x, [2, 0, 3, 1]), transpose(x) }", "f32 bf16 i32"},
    {"reshape", "model m(x: T[6, 35]) { return reshape(x, [5, 7, 6]) }", "f32 bf16 i32"},
    {"slice", "model m(x: T[6, 35, 3]) { return slice(x, axis: 1, start: 4, end: 31) }", "f32 bf16 i32"},
    {"concat", "model m(x: T[6, 5], y: T[6, 3], z: T[6, 1]) { return concat([x, y, z], axis: 1), concat([x, x], axis: 0) }", "f32 bf16 i32"},
    {"gather", "model m(t: T[7, 19], i: i32[4, 5]) { return gather(t, i) }", "f32 bf16 i32"},
    {"scatter_add", "model m(i: i32[4, 5], s: T[4, 5, 19]) { return scatter_add(i, s, rows: 7) }", "f32 bf16 f16"},
    /* cast hoisting: the sum of widened values reads them narrow and stores f32; a cast back
     * makes it store narrow */
    {"scatter_add_wide", "model m(i: i32[4, 5], s: T[4, 5, 19]) { return scatter_add(i, f32(s), rows: 7) }", "bf16 f16"},
    {"scatter_add_narrowed", "model m(i: i32[4, 5], s: T[4, 5, 19]) { return T (scatter_add(i, f32(s), rows: 7)) }",
     "bf16 f16"},
    {"iota_fill", "model m(x: T[3, 4]) { return x + f32(iota([3, 4], axis: 1)) * 0 + fill(2.5, [3, 4]), iota([5, 2], axis: 0) }", "f32"},
};

/* Replace each T by the dtype name. */
static void instantiate(const char *body, const char *dtype, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = body; *p && n + 8 < cap; p++) {
        bool alone = *p == 'T' && (p == body || p[-1] == ' ' || p[-1] == '(') && (p[1] == '[' || p[1] == ' ');
        if (alone) n += (size_t)snprintf(out + n, cap - n, "%s", dtype);
        else out[n++] = *p;
    }
    out[n] = 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* each case's line as it ends, also into a pipe: a run cut short shows how far it got */
    const char *only = getenv("NETC_GPU_CASE");
    const char *seed_env = getenv("NETC_GPU_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : 1234;
    int fails = 0, runs = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dtypes[64];
        snprintf(dtypes, sizeof dtypes, "%s", cases[c].dtypes);
        for (char *save = NULL, *dt = strtok_r(dtypes, " ", &save); dt; dt = strtok_r(NULL, " ", &save)) {
            char name[96], source[1024];
            snprintf(name, sizeof name, "%s_%s", cases[c].name, dt);
            if (only && strcmp(only, name) != 0) continue;
            instantiate(cases[c].body, dt, source, sizeof source);
            gpu_check_opts o = {.name = name, .source = source, .seed = seed + c, .int_range = 7};
            int rc = gpu_check(&o);
            if (rc == 77) { printf("no GPU: skipped\n"); return 77; }
            runs++;
            if (rc) fails++;
            else printf("ok %s\n", name);
        }
    }
    printf("%d passed, %d failed\n", runs - fails, fails);
    return fails ? 1 : 0;
}
