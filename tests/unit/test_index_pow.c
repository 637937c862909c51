/* test_index_pow.c - x[...] and '**' compute what they say, on the CPU
 * executor with random inputs.
 *
 * Each case is a model of one input x: f32[2, T, 5] (T a symbol, bound to 3
 * when it runs) returning the new syntax's value y and the same computation
 * written with the ops it stands for, z (slice and reshape calls, pow).
 * Both are compared element by element, bit for bit, with a reference
 * computed here in C from the input: the elements [lo, hi) of each axis,
 * the axes taken with a single index dropped; or a function of each element
 * for the powers. So a lowering that slices the wrong axis, counts from the
 * wrong end or keeps an axis fails, even where y and z compile alike.
 * Last, an index that only some sizes put past its axis (x[:, 5] of an axis
 * T) is refused when a session binds such a size (tc_check_binding), before
 * a kernel reads outside the axis. NETC_INDEX_CASE=name runs one case. */
#include "cpu_exec.h"
#include "driver.h"
#include "typecheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_VALUE = 3 };
static const int64_t in_shape[3] = {2, T_VALUE, 5};

typedef struct index_case {
    const char *name, *syntax, *calls;
    /* indexing: per input axis, the elements [lo, hi) (hi 0: to the end), dropped when drop */
    int64_t lo[3], hi[3];
    bool drop[3];
    /* a power: the reference of each element (NULL for an indexing case) */
    double (*elem)(double x);
} index_case;

/* pow as the executor calls it (in double, then rounded to f32) */
static double square_of(double x) { return pow(x, 2.0); }
static double neg_square(double x) { return -pow(x, 2.0); }
static double cube(double x) { return pow(x, 3.0); }
static double abs_plus_half(double x) { return (float)(fabs(x) + 0.5); }   /* a value the model stores in f32 */
static double root_of_abs(double x) { return pow(abs_plus_half(x), 0.5); }
static double inverse(double x) { return pow(x, -1.0); }
static double two_to(double x) { return pow(2.0, x); }
static double plus_512(double x) { return x + 512.0; }
static double quarter_power(double x) { return pow(abs_plus_half(x), 0.25); }   /* (|x| + 0.5) ** (0.5 ** 2) */

static const index_case cases[] = {
    {"index_first", "x[1]", "reshape(slice(x, axis: 0, start: 1, end: 2), [T, 5])", {1, 0, 0}, {2, 0, 0}, {true, false, false}, NULL},
    {"index_last_axis", "x[..., -1]", "reshape(slice(x, axis: 2, start: 4, end: 5), [2, T])", {0, 0, 4}, {0, 0, 5}, {false, false, true}, NULL},
    {"index_symbolic_from_end", "x[:, -1]", "reshape(slice(x, axis: 1, start: T - 1, end: T), [2, 5])", {0, T_VALUE - 1, 0},
     {0, T_VALUE, 0}, {false, true, false}, NULL},
    {"index_two", "x[0, 2]", "reshape(slice(slice(x, axis: 0, start: 0, end: 1), axis: 1, start: 2, end: 3), [5])", {0, 2, 0},
     {1, 3, 0}, {true, true, false}, NULL},
    {"index_all", "x[1, 0, 3]", "reshape(slice(slice(slice(x, axis: 0, start: 1, end: 2), axis: 1, start: 0, end: 1), axis: 2, start: 3, end: 4), [])",
     {1, 0, 3}, {2, 1, 4}, {true, true, true}, NULL},
    {"slice_range", "x[:, :, 1:3]", "slice(x, axis: 2, start: 1, end: 3)", {0, 0, 1}, {0, 0, 3}, {false, false, false}, NULL},
    {"slice_open_ends", "x[1:, :2, 3:]", "slice(slice(slice(x, axis: 0, start: 1, end: 2), axis: 1, start: 0, end: 2), axis: 2, start: 3, end: 5)",
     {1, 0, 3}, {0, 2, 0}, {false, false, false}, NULL},
    {"slice_negative", "x[..., -3:-1]", "slice(x, axis: 2, start: 2, end: 4)", {0, 0, 2}, {0, 0, 4}, {false, false, false}, NULL},
    {"slice_symbolic", "x[:, 1:T]", "slice(x, axis: 1, start: 1, end: T)", {0, 1, 0}, {0, 0, 0}, {false, false, false}, NULL},
    {"slice_arith", "x[..., C:2 * C]", "slice(x, axis: 2, start: 2, end: 4)", {0, 0, 2}, {0, 0, 4}, {false, false, false}, NULL},
    {"slice_and_index", "x[:, 0:T - 1, -2]", "reshape(slice(slice(x, axis: 1, start: 0, end: T - 1), axis: 2, start: 3, end: 4), [2, T - 1])",
     {0, 0, 3}, {0, T_VALUE - 1, 4}, {false, false, true}, NULL},
    {"slice_whole", "x[:]", "x", {0, 0, 0}, {0, 0, 0}, {false, false, false}, NULL},
    {"ellipsis_middle", "x[1, ..., 0:2]", "reshape(slice(slice(x, axis: 0, start: 1, end: 2), axis: 2, start: 0, end: 2), [T, 2])",
     {1, 0, 0}, {2, 0, 2}, {true, false, false}, NULL},
    {"pow_two", "x ** 2", "pow(x, 2.0)", {0}, {0}, {0}, square_of},
    {"pow_neg_binds_looser", "-x ** 2", "-pow(x, 2.0)", {0}, {0}, {0}, neg_square},
    {"pow_three", "x ** 3", "pow(x, 3.0)", {0}, {0}, {0}, cube},
    {"pow_half", "(abs(x) + 0.5) ** 0.5", "pow(abs(x) + 0.5, 0.5)", {0}, {0}, {0}, root_of_abs},
    {"pow_negative_exponent", "x ** -1", "pow(x, -1.0)", {0}, {0}, {0}, inverse},
    {"pow_tensor_exponent", "2.0 ** x", "pow(2.0, x)", {0}, {0}, {0}, two_to},
    {"pow_folded_right_assoc", "x + 2 ** 3 ** 2", "x + 512.0", {0}, {0}, {0}, plus_512},
    {"pow_right_assoc_tensor", "(abs(x) + 0.5) ** 0.5 ** 2", "pow(abs(x) + 0.5, 0.25)", {0}, {0}, {0}, quarter_power},
};

static int failures;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float next_uniform(void)   /* xorshift64: in [-2, 2) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

/* The reference for an indexing case: the input's elements in the kept
 * ranges, in order; writes the expected shape. */
static int64_t index_reference(const index_case *c, const float *x, float *out, int64_t *shape, int *rank)
{
    int64_t lo[3], hi[3];
    *rank = 0;
    for (int a = 0; a < 3; a++) {
        lo[a] = c->lo[a];
        hi[a] = c->hi[a] ? c->hi[a] : in_shape[a];
        if (!c->drop[a]) shape[(*rank)++] = hi[a] - lo[a];
    }
    int64_t n = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++) out[n++] = x[(i * in_shape[1] + j) * in_shape[2] + k];
    return n;
}

static bool check_output(const index_case *c, const char *which, const cpu_tensor *got, const float *want, const int64_t *shape,
                         int rank, int64_t n)
{
    bool ok = got->rank == rank && got->numel == n;
    for (int k = 0; ok && k < rank; k++) ok = got->shape[k] == shape[k];
    if (!ok) {
        fprintf(stderr, "%s: %s has rank %d, %lld elements; expected rank %d, %lld\n", c->name, which, got->rank,
                (long long)got->numel, rank, (long long)n);
        return false;
    }
    for (int64_t i = 0; i < n; i++)
        if (!same_bits(got->f[i], want[i])) {
            fprintf(stderr, "%s: %s[%lld] = %.9g, expected %.9g\n", c->name, which, (long long)i, got->f[i], want[i]);
            return false;
        }
    return true;
}

static void run_case(const index_case *c)
{
    char source[1024];
    snprintf(source, sizeof source,
             "model m(x: f32[2, T, 5])\n  config C = 2\n{\n  y = %s\n  z = %s\n  return y, z\n}\n", c->syntax, c->calls);
    src_table src = {0};
    uint32_t id = src_add(&src, c->name, source, strlen(source));
    diag_ctx d;
    diag_init(&d, &src, stderr);
    driver_opts o = {.verify = true};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    if (!g) {
        fprintf(stderr, "FAIL %s: does not compile:\n%s", c->name, source);
        failures++;
        src_free(&src);
        return;
    }
    cpu_tensor x = {0};
    cpu_tensor_alloc(&x, NC_F32, 3, in_shape, 0);
    for (int64_t i = 0; i < x.numel; i++) x.f[i] = next_uniform();
    int64_t syms[1] = {T_VALUE};
    cpu_exec_opts eo = {.syms = syms, .inputs = &x};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &eo, &res, err, sizeof err)) {
        fprintf(stderr, "FAIL %s: %s\n", c->name, err);
        failures++;
    } else {
        float want[64];
        int64_t shape[3];
        int rank;
        int64_t n;
        if (c->elem) {
            rank = 3;
            memcpy(shape, in_shape, sizeof shape);
            n = x.numel;
            for (int64_t i = 0; i < n; i++) want[i] = (float)c->elem((double)x.f[i]);
        } else {
            n = index_reference(c, x.f, want, shape, &rank);
        }
        bool ok = check_output(c, "y (the syntax)", &res.values[g->outputs[0].value], want, shape, rank, n) &&
                  check_output(c, "z (the calls)", &res.values[g->outputs[1].value], want, shape, rank, n);
        if (ok) printf("ok %s\n", c->name);
        else failures++, fprintf(stderr, "FAIL %s (rerun: NETC_INDEX_CASE=%s)\n", c->name, c->name);
        cpu_exec_result_free(&res);
    }
    cpu_tensor_free(&x);
    ir_graph_free(g);
    src_free(&src);
}

/* The binding check of every node at the sizes syms: the first message, or ""
 * (e's last message freed first). */
static const char *binding_error(const ir_graph *g, const int64_t *syms, tc_error *e)
{
    tc_error_free(e);
    for (ir_value v = 0; v < g->nnodes; v++)
        if (!tc_check_binding(g, &g->nodes[v], syms, e)) return e->msg;
    return "";
}

static void run_binding_case(void)
{
    const char *source = "model m(x: f32[B, T]) {\n  return x[:, 5] + x[:, -7]\n}\n";
    src_table src = {0};
    uint32_t id = src_add(&src, "late.net", source, strlen(source));
    diag_ctx d;
    diag_init(&d, &src, stderr);
    driver_opts o = {.verify = true};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    if (!g) { failures++; src_free(&src); return; }
    tc_error e = {0};
    bool ok = true;
    const int64_t fits[2] = {2, 7}, short_axis[2] = {2, 6}, shorter[2] = {2, 3};
    const char *msg = binding_error(g, fits, &e);
    if (msg[0]) ok = false, fprintf(stderr, "binding: T = 7 refused: %s\n", msg);
    msg = binding_error(g, short_axis, &e);   /* x[:, -7] starts at T - 7 = -1 */
    if (!strstr(msg, "[T - 7, T - 6) of an axis of size T: at B = 2, T = 6")) ok = false, fprintf(stderr, "binding: T = 6: '%s'\n", msg);
    msg = binding_error(g, shorter, &e);       /* x[:, 5] is past the end */
    if (!strstr(msg, "the slice at late.net:2 takes [5, 6) of an axis of size T: at B = 2, T = 3 that is not inside the axis"))
        ok = false, fprintf(stderr, "binding: T = 3: '%s'\n", msg);
    if (ok) printf("ok binding\n");
    else failures++, fprintf(stderr, "FAIL binding (rerun: NETC_INDEX_CASE=binding)\n");
    tc_error_free(&e);
    ir_graph_free(g);
    src_free(&src);
}

int main(void)
{
    const char *only = getenv("NETC_INDEX_CASE");
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (only && strcmp(only, cases[i].name) != 0) continue;
        run_case(&cases[i]);
        ran++;
    }
    if (!only || strcmp(only, "binding") == 0) run_binding_case(), ran++;
    printf("%d passed, %d failed\n", ran - failures, failures);
    return failures != 0 || ran == 0;
}
