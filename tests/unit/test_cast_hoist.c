/* test_cast_hoist.c - the cast-hoisting pass is exact and does what it says.
 *
 * Each case runs on the CPU executor with the pass and without it, on inputs
 * full of values that round badly: NaN, infinities, -0, f16 overflow, ties
 * at the f16/bf16 rounding boundaries, subnormals. Results must agree bit for
 * bit. Each case also states what the pass must have done: how many casts
 * remain and in which dtype a named op now runs. */
#include "cpu_exec.h"
#include "driver.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hoist_case {
    const char *name;
    const char *source;        /* a model m */
    int casts_after;           /* cast nodes left with the pass */
    nc_op op;                  /* and this op ... */
    nc_dtype op_dtype;         /* ... computes in this dtype (NC_DTYPE_COUNT: no check) */
    bool few_specials;         /* one input in 61 special, not one in 3 (a matmul row would be all NaN) */
} hoist_case;

static const hoist_case cases[] = {
    {"transpose", "model m(x: f32[64, 48]) -> f16[48, 64] { return f16(transpose(x)) }", 1, OP_TRANSPOSE, NC_F16, false},
    {"relu_reshape", "model m(x: f32[64, 48]) -> bf16[48, 64] { return bf16(relu(reshape(x, [48, 64]))) }", 1, OP_RELU,
     NC_BF16, false},
    /* above the transpose; not above maximum: two input casts cost what they save */
    {"maximum", "model m(x: f32[64, 48], z: f32[64, 48]) -> f16[48, 64] { return f16(transpose(maximum(x, z))) }", 1,
     OP_TRANSPOSE, NC_F16, false},
    /* rounding to nearest is symmetric: negation and |x| commute with it, as a select does */
    {"neg_abs", "model m(x: f32[64, 48]) -> f16[48, 64] { return f16(abs(transpose(-x))) }", 1, OP_ABS, NC_F16, false},
    {"where", "model m(s: f32[64, 48], a: f16[64, 48], b: f16[64, 48]) -> f16[48, 64] "
              "{ return f16(transpose(where(s > 0.5, f32(a), f32(b)))) }", 0, OP_WHERE, NC_F16, false},
    /* a reduction's output is small: narrowing its input would cost more ... */
    {"max_reduce", "model m(x: f32[48, 64]) -> f16[64] { return f16(max(x, axis: 0)) }", 1, OP_MAX, NC_F32, false},
    /* ... unless the cast then climbs on, above a transpose it halves: the
     * whole chain is costed, not one op */
    {"max_reduce_chain", "model m(x: f32[64, 48]) -> f16[64] { return f16(max(transpose(x), axis: 0)) }", 1, OP_MAX,
     NC_F16, false},
    /* a sum rounds once at the end: narrowing what it adds up is another
     * result, so the cast stays below it even where max's would climb */
    {"sum_blocks", "model m(x: f32[64, 48]) -> f16[64] { return f16(sum(transpose(x), axis: 0)) }", 1, OP_SUM, NC_F32, false},
    /* relu of a broadcast: narrow the small operand before broadcasting */
    {"broadcast", "model m(x: f32[48]) -> bf16[64, 48] { return bf16(relu(broadcast(x, [64, 48]))) }", 1, OP_BROADCAST,
     NC_BF16, false},
    {"concat", "model m(x: f32[32, 48], z: f32[32, 48]) -> bf16[48, 64] { return bf16(transpose(concat([x, z], axis: 0))) }",
     2, OP_CONCAT, NC_BF16, false},
    {"gather", "model m(t: f32[16, 64], i: i32[512]) -> f16[64, 512] { return f16(transpose(gather(t, i))) }", 1,
     OP_GATHER, NC_F16, false},
    {"upcast_sinks", "model m(h: bf16[64, 48]) -> f32[48, 64] { return transpose(f32(h)) }", 1, OP_TRANSPOSE, NC_BF16, false},
    {"identity_removed", "model m(h: f16[64, 48]) -> f16[48, 64] { return f16(transpose(f32(h))) }", 0, OP_TRANSPOSE,
     NC_F16, false},
    {"rounding_kept", "model m(x: f32[64, 48]) -> f32[48, 64] { return transpose(f32(f16(x))) }", 2, OP_CAST,
     NC_DTYPE_COUNT, false},
    /* a slice keeping a quarter: narrowing before it would move more bytes */
    {"slice_not_worth", "model m(x: f32[256, 64]) -> f16[64, 64] { return f16(slice(x, axis: 0, start: 0, end: 64)) }", 1,
     OP_SLICE, NC_F32, false},
    /* an add does not commute with rounding: the cast stays below it */
    {"add_blocks", "model m(x: f32[48], z: f32[48]) -> f16[64, 48] { return f16(broadcast(x, [64, 48]) + broadcast(z, [64, 48])) }",
     1, OP_ADD, NC_F32, false},
    /* a product of f16 values in f32 reads them as f16 (no casts) ... */
    {"product_reads_narrow", "model m(a: f16[32, 48], b: f16[48, 40]) -> f32[32, 40] { return f32(a) @ f32(b) }", 0,
     OP_MATMUL, NC_F32, true},
    /* ... and stores f16 when a down-cast reaches it through movement */
    {"product_stores_narrow",
     "model m(a: f16[2, 32, 48], b: f16[48, 64]) -> f16[2, 16, 64] "
     "{ return f16(slice(reshape(transpose(f32(a) @ f32(b), [0, 2, 1]), [2, 32, 64]), axis: 1, start: 0, end: 16)) }",
     0, OP_MATMUL, NC_F16, true},
    /* cuBLASLt stores bf16 operands' product as bf16 or f32, not f16 */
    {"product_other_dtype", "model m(a: bf16[32, 48], b: bf16[48, 40]) -> f16[32, 40] { return f16(f32(a) @ f32(b)) }", 1,
     OP_MATMUL, NC_F32, true},
    /* nor f16 from f32 operands */
    {"product_of_f32", "model m(a: f32[32, 48], b: f32[48, 40]) -> f16[40, 32] { return f16(transpose(a @ b)) }", 1,
     OP_MATMUL, NC_F32, true},
    /* there, a transpose the slice reads through costs nothing to move
     * wide, so the cast stays below the slice that drops three quarters */
    {"product_of_f32_sliced",
     "model m(a: f32[2, 32, 48], b: f32[48, 64]) -> f16[2, 8, 64] "
     "{ return f16(slice(reshape(transpose(a @ b, [0, 2, 1]), [2, 32, 64]), axis: 1, start: 0, end: 8)) }",
     1, OP_SLICE, NC_F32, true},
    /* an embedding's backward: the scatter-add reads the narrow gradient ... */
    {"scatter_reads_narrow", "model m(i: i32[40], g: bf16[40, 24]) -> f32[16, 24] { return scatter_add(i, f32(g), rows: 16) }",
     0, OP_SCATTER_ADD, NC_F32, false},
    /* ... and rounds its f32 sums once when a cast back follows */
    {"scatter_stores_narrow",
     "model m(i: i32[40], g: f16[40, 24]) -> f16[24, 16] { return f16(transpose(scatter_add(i, f32(g), rows: 16))) }", 0,
     OP_SCATTER_ADD, NC_F16, false},
    /* the f32 product is read elsewhere too: one matmul, one cast, both reads from it */
    {"product_shared",
     "model m(a: f16[32, 48], b: f16[48, 40]) -> f16[32, 40] { p = f32(a) @ f32(b)\n return f16(relu(p)) * f16(p) }", 1,
     OP_MATMUL, NC_F32, true},
};

static const float specials[] = {
    NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 65504.0f, 65520.0f, -65520.0f, 1.00048828125f /* 1 + 2^-11: f16 tie */,
    1.00146484375f /* 1 + 3*2^-11 */, 1.00390625f /* 1 + 2^-8: bf16 tie */, 1e-8f, -3e-5f, 6.1e-5f, 3.4e38f, -1e-30f,
};

static void fill(cpu_tensor *t, uint64_t seed, int64_t index_limit, bool few_specials)
{
    uint64_t every = few_specials ? 61 : 3;
    for (int64_t j = 0; j < t->numel; j++) {
        if (t->i) {
            t->i[j] = (int32_t)(nc_rng_hash(seed, 1, (uint64_t)j) % (uint64_t)index_limit);
            continue;
        }
        uint64_t h = nc_rng_hash(seed, 2, (uint64_t)j);
        float v = h % every == 0 ? specials[(h >> 8) % NC_COUNT(specials)] : (nc_rng_uniform(seed, 3, (uint64_t)j) - 0.5f) * 8;
        cpu_set(t, j, v);
    }
}

static ir_graph *compile(const char *source, bool hoist)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, "case.net", source, strlen(source));
    const char *off[] = {"cast-hoist"};
    driver_opts o = {.verify = true, .disabled_passes = off, .ndisabled = hoist ? 0 : 1};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    return g;
}

static bool run(const ir_graph *g, bool few_specials, cpu_exec_result *res)
{
    cpu_tensor *in = calloc(g->ninputs + 1, sizeof *in);
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) dim_is_const(&g->dims[g->inputs[i].shape[k]], &shape[k]);
        cpu_tensor_alloc(&in[i], g->inputs[i].dtype, g->inputs[i].rank, shape, 0);
        fill(&in[i], 100 + i, 16, few_specials);
    }
    char err[512];
    cpu_exec_opts o = {.inputs = in};
    int rc = cpu_exec_run(g, &o, res, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&in[i]);
    free(in);
    return rc == 0;
}

static void check_case(const hoist_case *c)
{
    ir_graph *with = compile(c->source, true), *without = compile(c->source, false);
    int bad = 0;
    if (!with || !without) {
        fprintf(stderr, "%s: does not compile\n", c->name);
        bad++;
        goto done;
    }
    cpu_exec_result a, b;
    if (!run(with, c->few_specials, &a) || !run(without, c->few_specials, &b)) {
        bad++;
        goto done;
    }
    const cpu_tensor *x = &a.values[with->outputs[0].value], *y = &b.values[without->outputs[0].value];
    if (x->numel != y->numel || x->dtype != y->dtype) bad++;
    for (int64_t j = 0; !bad && j < x->numel; j++)
        if (x->f ? !same_bits(x->f[j], y->f[j]) : x->i[j] != y->i[j]) {
            fprintf(stderr, "%s: element %lld differs: %g with the pass, %g without\n", c->name, (long long)j,
                    x->f ? x->f[j] : x->i[j], y->f ? y->f[j] : y->i[j]);
            bad++;
        }
    int casts = 0, matmuls = 0;
    bool op_ok = c->op_dtype == NC_DTYPE_COUNT;
    for (ir_value v = 0; v < with->nnodes; v++) {
        casts += with->nodes[v].op == OP_CAST;
        matmuls += with->nodes[v].op == OP_MATMUL;
        if (with->nodes[v].op == c->op && with->nodes[v].dtype == c->op_dtype) op_ok = true;
    }
    if (matmuls > 1) {   /* a product is never computed twice to save a cast */
        fprintf(stderr, "%s: %d matmuls after the pass\n", c->name, matmuls);
        bad++;
    }
    if (casts != c->casts_after || !op_ok) {
        fprintf(stderr, "%s: %d casts after the pass (want %d)%s\n", c->name, casts, c->casts_after,
                op_ok ? "" : "; the op is not computed in the expected dtype");
        ir_print(with, stderr);
        bad++;
    }
    cpu_exec_result_free(&a);
    cpu_exec_result_free(&b);
done:
    ir_graph_free(with);
    ir_graph_free(without);
    if (bad) failures++;
    printf("%s %s\n", bad ? "FAIL" : "ok", c->name);
}

int main(void)
{
    for (size_t i = 0; i < NC_COUNT(cases); i++) check_case(&cases[i]);
    printf("%zu cases, %d failed\n", NC_COUNT(cases), failures);
    return failures != 0;
}
