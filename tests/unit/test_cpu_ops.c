/* test_cpu_ops.c - every op of the table on the CPU executor, against values
 * computed by hand (the arithmetic is in the comments), plus the executor's
 * error paths: bad input shapes, indices out of range, absurd sizes.
 *
 * Each test builds a tiny graph with the IR API, runs it with keep_all and
 * compares node values. At the end, an op of ops.def that no test built is
 * itself a failure, so a new op cannot arrive without a test. */
#include "cpu_crew.h"
#include "cpu_exec.h"
#include "cpu_kernels.h"
#include "typecheck.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static bool tested[OP_COUNT];

#define S(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define V(...) (const double[]){__VA_ARGS__}, (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define A(...) (const ir_value[]){__VA_ARGS__}, (int)(sizeof((const ir_value[]){__VA_ARGS__}) / sizeof(ir_value))
#define NOATTR ((ir_attr){0})
#define P8 (1.0 / 256)          /* 2^-8: half a bf16 ulp at 1 */

/* ------------------------------------------------------------------ */
/* harness                                                              */

typedef struct tcase {
    const char *name;
    ir_graph *g;
    cpu_tensor in[16], par[4];
    int64_t syms[NC_MAX_SYMS];
    cpu_exec_opts o;
    cpu_exec_result res;
    cpu_pool pool;
    char err[512];
} tcase;

static void begin(tcase *t, const char *name)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->g = ir_graph_new(name);
    t->o.keep_all = true;
}

static void end(tcase *t)
{
    cpu_exec_result_free(&t->res);
    cpu_pool_free(&t->pool);
    for (uint32_t i = 0; i < t->g->ninputs; i++) cpu_tensor_free(&t->in[i]);
    for (uint32_t i = 0; i < t->g->nparams; i++) cpu_tensor_free(&t->par[i]);
    ir_graph_free(t->g);
}

static void fail(const tcase *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const tcase *t, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL %s: ", t->name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    failures++;
}

static void const_dims(tcase *t, const int64_t *shape, int rank, uint32_t *dims)
{
    for (int i = 0; i < rank; i++) dims[i] = ir_dim_const(t->g, shape[i]);
}

static void fill_tensor(tcase *t, cpu_tensor *x, nc_dtype dt, const int64_t *shape, int rank, const double *vals, int n)
{
    if (!cpu_tensor_alloc(x, dt, (uint8_t)rank, shape, 0)) {
        fail(t, "cannot allocate a test tensor");
        exit(1);
    }
    if (vals && n != x->numel) {
        fail(t, "test bug: %d values for %lld elements", n, (long long)x->numel);
        exit(1);
    }
    for (int i = 0; vals && i < n; i++) cpu_set(x, i, vals[i]);
}

/* Declares an input of shape dims (dim ids) and adds its node. */
static ir_value declare(tcase *t, nc_dtype dt, int rank, const uint32_t *dims)
{
    if (t->g->ninputs == NC_COUNT(t->in)) {
        fail(t, "test bug: more than %d inputs", (int)NC_COUNT(t->in));
        exit(1);
    }
    char name[8];
    snprintf(name, sizeof name, "x%u", t->g->ninputs);
    ir_tensor_decl d = {.name = name, .dtype = dt, .rank = (uint8_t)rank};
    memcpy(d.shape, dims, (size_t)rank * sizeof *dims);
    ir_node n = {.op = OP_INPUT, .dtype = dt, .rank = (uint8_t)rank, .attr.index = ir_input_add(t->g, &d)};
    memcpy(n.shape, dims, (size_t)rank * sizeof *dims);
    tested[OP_INPUT] = true;
    return ir_add(t->g, &n, NULL, 0);
}

/* An input with constant dims and its data (NULL data: zeros). */
static ir_value in(tcase *t, nc_dtype dt, const int64_t *shape, int rank, const double *vals, int n)
{
    uint32_t dims[NC_MAX_RANK];
    const_dims(t, shape, rank, dims);
    ir_value v = declare(t, dt, rank, dims);
    fill_tensor(t, &t->in[t->g->ninputs - 1], dt, shape, rank, vals, n);
    return v;
}

static ir_value param(tcase *t, nc_dtype dt, const int64_t *shape, int rank, const double *vals, int n)
{
    if (t->g->nparams == NC_COUNT(t->par)) {
        fail(t, "test bug: more than %d params", (int)NC_COUNT(t->par));
        exit(1);
    }
    ir_param p = {.decl = {.name = "w", .dtype = dt, .rank = (uint8_t)rank}};
    const_dims(t, shape, rank, p.decl.shape);
    ir_node node = {.op = OP_PARAM, .dtype = dt, .rank = (uint8_t)rank, .attr.index = ir_param_add(t->g, &p)};
    memcpy(node.shape, p.decl.shape, sizeof node.shape);
    fill_tensor(t, &t->par[t->g->nparams - 1], dt, shape, rank, vals, n);
    tested[OP_PARAM] = true;
    return ir_add(t->g, &node, NULL, 0);
}

static ir_value build(tcase *t, ir_node proto, const ir_value *args, int nargs)
{
    tc_error e;
    ir_value v;
    tested[proto.op] = true;
    if (!ir_build(t->g, &proto, args, (uint16_t)nargs, &v, &e)) {
        fail(t, "test bug: building %s: %s", op_name(proto.op), e.msg);
        exit(1);
    }
    return v;
}

static ir_value op(tcase *t, nc_op o, ir_attr a, const ir_value *args, int nargs)
{
    return build(t, (ir_node){.op = o, .attr = a}, args, nargs);
}

/* Ops whose result shape and dtype are given, not derived: fill, iota, reshape, broadcast. */
static ir_value op_shaped(tcase *t, nc_op o, nc_dtype dt, ir_attr a, const int64_t *shape, int rank,
                          const ir_value *args, int nargs)
{
    ir_node n = {.op = o, .dtype = dt, .rank = (uint8_t)rank, .attr = a};
    const_dims(t, shape, rank, n.shape);
    return build(t, n, args, nargs);
}

/* Each case runs twice through one pool, as a training step repeats: the
 * second run must take every buffer from the pool (allocate nothing), and
 * the pool's buffers are poisoned in between (0xff bytes: NaN, or -1), so a
 * kernel that leaves an element of its result unwritten gives a wrong value. */
static int run_raw(tcase *t)
{
    t->o.syms = t->syms;
    t->o.inputs = t->in;
    t->o.params = t->par;
    t->o.pool = &t->pool;
    cpu_exec_result_free(&t->res);
    int rc = cpu_exec_run(t->g, &t->o, &t->res, t->err, sizeof t->err);
    if (rc) return rc;
    cpu_exec_result_free(&t->res);
    for (uint32_t k = 0; k < t->pool.n; k++) memset(t->pool.bufs[k].data, 0xff, t->pool.bufs[k].bytes);
    uint64_t fresh = t->pool.fresh;
    rc = cpu_exec_run(t->g, &t->o, &t->res, t->err, sizeof t->err);
    if (rc == 0 && t->pool.fresh != fresh)
        fail(t, "the second run allocated %llu buffers, not reusing the first run's",
             (unsigned long long)(t->pool.fresh - fresh));
    return rc;
}

static bool run(tcase *t)
{
    if (run_raw(t) == 0) return true;
    fail(t, "run failed: %s", t->err);
    return false;
}

static void run_expect_error(tcase *t, const char *want)
{
    if (run_raw(t) == 0) {
        fail(t, "run succeeded, expected an error containing \"%s\"", want);
        return;
    }
    if (!strstr(t->err, want)) fail(t, "error \"%s\" does not contain \"%s\"", t->err, want);
    if (t->res.values || t->res.nvalues) fail(t, "a failed run left values behind");
}

static bool close_to(double got, double want, double tol)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want) || tol == 0) return got == want;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

static const cpu_tensor *value(tcase *t, ir_value v)
{
    if (!t->res.values || v >= t->res.nvalues) return NULL;
    const cpu_tensor *x = &t->res.values[v];
    return x->f || x->i ? x : NULL;
}

/* Elementwise comparison; tol 0 = exact (NaN matches NaN). */
/* Each element within rel of its expected value, however small that is. */
static void expect_rel(tcase *t, const char *what, ir_value v, double rel, const double *want, int n)
{
    const cpu_tensor *x = value(t, v);
    if (!x || x->numel != n) {
        fail(t, "[%s] %%%u has no value of %d elements", what, v, n);
        return;
    }
    for (int i = 0; i < n; i++)
        if (!(fabs(cpu_get(x, i) - want[i]) <= rel * fabs(want[i])))
            fail(t, "[%s] element %d: expected %.9g, got %.9g", what, i, want[i], cpu_get(x, i));
}

static void expect_tol(tcase *t, const char *what, ir_value v, double tol, const double *want, int n)
{
    const cpu_tensor *x = value(t, v);
    if (!x) {
        fail(t, "[%s] %%%u has no value", what, v);
        return;
    }
    if (x->numel != n) {
        fail(t, "[%s] %%%u has %lld elements, expected %d", what, v, (long long)x->numel, n);
        return;
    }
    for (int i = 0; i < n; i++) {
        double got = cpu_get(x, i);
        if (!close_to(got, want[i], tol))
            fail(t, "[%s] %s element %d: expected %.9g, got %.9g", what, op_name(t->g->nodes[v].op), i, want[i], got);
    }
}

static void expect(tcase *t, const char *what, ir_value v, const double *want, int n)
{
    expect_tol(t, what, v, 0, want, n);
}

static void expect_shape(tcase *t, const char *what, ir_value v, const int64_t *shape, int rank)
{
    const cpu_tensor *x = value(t, v);
    if (!x) {
        fail(t, "[%s] %%%u has no value", what, v);
        return;
    }
    bool ok = x->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = x->shape[i] == shape[i];
    if (!ok) fail(t, "[%s] %%%u has the wrong shape (rank %d, first dim %lld)", what, v, x->rank,
                  (long long)(x->rank ? x->shape[0] : -1));
}

#define TOL 1e-6   /* transcendental results: f32 rounding of the double value, a few ulp */

/* ------------------------------------------------------------------ */
/* sources                                                              */

static void test_fill_iota(void)
{
    tcase t;
    begin(&t, "fill/iota");
    ir_value f32 = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 1.5}, S(2, 2), NULL, 0);
    ir_value sc = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 3.25}, NULL, 0, NULL, 0);
    /* 1 + 3*2^-8 is a bf16 tie between 1+2^-7 (odd) and 1+2^-6 (even): up. */
    ir_value bf = op_shaped(&t, OP_FILL, NC_BF16, (ir_attr){.f = 1 + 3 * P8}, S(3), NULL, 0);
    ir_value i32 = op_shaped(&t, OP_FILL, NC_I32, (ir_attr){.f = -2.7}, S(2), NULL, 0);
    ir_value u8 = op_shaped(&t, OP_FILL, NC_U8, (ir_attr){.f = 300}, S(2), NULL, 0);
    ir_value bl = op_shaped(&t, OP_FILL, NC_BOOL, (ir_attr){.f = 0.5}, S(2), NULL, 0);
    ir_value io1 = op_shaped(&t, OP_IOTA, NC_I32, (ir_attr){.axis = 1}, S(2, 3), NULL, 0);
    ir_value io0 = op_shaped(&t, OP_IOTA, NC_I32, (ir_attr){.axis = 0}, S(2, 3), NULL, 0);
    ir_value iof = op_shaped(&t, OP_IOTA, NC_F32, (ir_attr){.axis = -1}, S(4), NULL, 0);
    ir_value iob = op_shaped(&t, OP_IOTA, NC_BF16, (ir_attr){.axis = 0}, S(257), NULL, 0);   /* the longest exact */
    /* an axis with axes before and after it: each value repeats along the
     * inner axis, and the block of both repeats along the outer */
    ir_value io3 = op_shaped(&t, OP_IOTA, NC_I32, (ir_attr){.axis = 1}, S(2, 3, 2), NULL, 0);
    /* the longest a u8 and a bool hold (a longer one is a type error: its shape rule) */
    ir_value iou = op_shaped(&t, OP_IOTA, NC_U8, (ir_attr){.axis = 0}, S(256), NULL, 0);
    ir_value iol = op_shaped(&t, OP_IOTA, NC_BOOL, (ir_attr){.axis = 1}, S(2, 2), NULL, 0);
    if (run(&t)) {
        expect(&t, "iota rank 3 axis 1", io3, V(0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2));
        expect(&t, "iota bool", iol, V(0, 1, 0, 1));
        const cpu_tensor *u = value(&t, iou);
        if (u && (u->i[0] != 0 || u->i[254] != 254 || u->i[255] != 255))
            fail(&t, "iota u8: got %d %d %d, expected 0 254 255", u->i[0], u->i[254], u->i[255]);
        expect(&t, "fill f32", f32, V(1.5, 1.5, 1.5, 1.5));
        expect(&t, "fill scalar", sc, V(3.25));
        expect_shape(&t, "fill scalar", sc, NULL, 0);
        expect(&t, "fill bf16 tie", bf, V(1 + 4 * P8, 1 + 4 * P8, 1 + 4 * P8));
        expect(&t, "fill i32 truncates", i32, V(-2, -2));
        expect(&t, "fill u8 saturates", u8, V(255, 255));
        expect(&t, "fill bool", bl, V(1, 1));
        expect(&t, "iota axis 1", io1, V(0, 1, 2, 0, 1, 2));
        expect(&t, "iota axis 0", io0, V(0, 0, 0, 1, 1, 1));
        expect(&t, "iota f32", iof, V(0, 1, 2, 3));
        /* bf16 holds every whole number to 256; a longer iota is a type error (its shape rule) */
        const cpu_tensor *b = value(&t, iob);
        if (b && (b->f[1] != 1 || b->f[255] != 255 || b->f[256] != 256))
            fail(&t, "iota bf16: got %g %g %g, expected 1 255 256", b->f[1], b->f[255], b->f[256]);
    }
    end(&t);
}

static void test_param(void)
{
    tcase t;
    begin(&t, "param");
    ir_value x = in(&t, NC_F32, S(2), V(1, 2));
    ir_value w = param(&t, NC_F32, S(2), V(10, 20));
    ir_value y = op(&t, OP_ADD, NOATTR, A(x, w));
    if (run(&t)) {
        expect(&t, "param value", w, V(10, 20));
        expect(&t, "input + param", y, V(11, 22));
    }
    end(&t);
}

/* ------------------------------------------------------------------ */
/* elementwise                                                          */

static void test_unary_numeric(void)
{
    tcase t;
    begin(&t, "unary numeric");
    ir_value xf = in(&t, NC_F32, S(4), V(1, -2, -0.0, 2.5));
    ir_value xi = in(&t, NC_I32, S(3), V(5, -3, INT32_MIN));
    ir_value xs = in(&t, NC_I32, S(2), V(46341, -3));
    ir_value xu = in(&t, NC_U8, S(2), V(16, 3));
    ir_value xn = in(&t, NC_F32, S(4), V(-1, 0, 2.5, NAN));
    ir_value negf = op(&t, OP_NEG, NOATTR, A(xf)), negi = op(&t, OP_NEG, NOATTR, A(xi));
    ir_value absf = op(&t, OP_ABS, NOATTR, A(xf)), absi = op(&t, OP_ABS, NOATTR, A(xi));
    ir_value sqf = op(&t, OP_SQUARE, NOATTR, A(xf)), sqi = op(&t, OP_SQUARE, NOATTR, A(xs));
    ir_value squ = op(&t, OP_SQUARE, NOATTR, A(xu));
    ir_value reluf = op(&t, OP_RELU, NOATTR, A(xn)), relui = op(&t, OP_RELU, NOATTR, A(xi));
    if (run(&t)) {
        expect(&t, "neg f32", negf, V(-1, 2, 0, -2.5));
        const cpu_tensor *n = value(&t, negf);
        if (n && !signbit(n->f[0])) fail(&t, "neg(1) lost its sign");
        /* -INT32_MIN does not fit: wraps back to INT32_MIN. */
        expect(&t, "neg i32 wraps", negi, V(-5, 3, INT32_MIN));
        expect(&t, "abs f32", absf, V(1, 2, 0, 2.5));
        expect(&t, "abs i32 wraps", absi, V(5, 3, INT32_MIN));
        expect(&t, "square f32", sqf, V(1, 4, 0, 6.25));
        /* 46341^2 = 2147488281 = 2^31 + 4633 wraps to 2147488281 - 2^32 = -2147479015. */
        expect(&t, "square i32 wraps", sqi, V(-2147479015.0, 9));
        expect(&t, "square u8 wraps", squ, V(0, 9));   /* 256 mod 256 */
        expect(&t, "relu f32, NaN wins", reluf, V(0, 0, 2.5, NAN));
        expect(&t, "relu i32", relui, V(5, 0, 0));
    }
    end(&t);
}

static void test_unary_float(void)
{
    tcase t;
    begin(&t, "unary float");
    ir_value x = in(&t, NC_F32, S(4), V(0, 1, -1, 89));
    ir_value xl = in(&t, NC_F32, S(4), V(1, 4, 0, -1));
    ir_value xr = in(&t, NC_F32, S(3), V(4, 0.25, 0));
    ir_value xt = in(&t, NC_F32, S(3), V(0, 1, -20));
    ir_value xg = in(&t, NC_F32, S(3), V(0, 2, -1000));
    ir_value xb = in(&t, NC_BF16, S(1), V(1));
    ir_value xh = in(&t, NC_F16, S(1), V(1));
    ir_value e = op(&t, OP_EXP, NOATTR, A(x)), l = op(&t, OP_LOG, NOATTR, A(xl));
    ir_value sq = op(&t, OP_SQRT, NOATTR, A(xl)), rs = op(&t, OP_RSQRT, NOATTR, A(xr));
    ir_value th = op(&t, OP_TANH, NOATTR, A(xt)), sg = op(&t, OP_SIGMOID, NOATTR, A(xg));
    ir_value ge = op(&t, OP_GELU, NOATTR, A(x)), gt = op(&t, OP_GELU_TANH, NOATTR, A(x));
    ir_value si = op(&t, OP_SILU, NOATTR, A(x)), ef = op(&t, OP_ERF, NOATTR, A(x));
    ir_value eb = op(&t, OP_EXP, NOATTR, A(xb)), eh = op(&t, OP_EXP, NOATTR, A(xh));
    ir_value sn = op(&t, OP_SIN, NOATTR, A(xg)), cs = op(&t, OP_COS, NOATTR, A(xg));
    if (run(&t)) {
        /* e^89 = 4.49e38 is past FLT_MAX: inf once rounded to f32. */
        expect_tol(&t, "exp", e, TOL, V(1, 2.718281828459045, 0.36787944117144233, INFINITY));
        expect_tol(&t, "log", l, TOL, V(0, 1.3862943611198906, -INFINITY, NAN));
        expect_tol(&t, "sqrt", sq, TOL, V(1, 2, 0, NAN));
        expect_tol(&t, "rsqrt", rs, TOL, V(0.5, 2, INFINITY));
        expect_tol(&t, "tanh", th, TOL, V(0, 0.7615941559557649, -1));
        /* radians, reduced exactly however large: sin(-1000) = -0.8268795405320025 */
        expect_tol(&t, "sin", sn, TOL, V(0, 0.9092974268256817, -0.8268795405320025));
        expect_tol(&t, "cos", cs, TOL, V(1, -0.4161468365471424, 0.5623790762907029));
        /* sigmoid(-1000) = 1/(1+e^1000) = 1/inf = 0, no NaN. */
        expect_tol(&t, "sigmoid", sg, TOL, V(0.5, 0.8807970779778823, 0));
        /* 0.5*x*(1+erf(x/sqrt2)): x=1 -> 0.841344746, x=-1 -> -0.158655254; x=89 -> 89. */
        expect_tol(&t, "gelu", ge, TOL, V(0, 0.8413447460685429, -0.15865525393145707, 89));
        /* 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715x^3))): x=1 -> 0.841191991. */
        expect_tol(&t, "gelu_tanh", gt, TOL, V(0, 0.8411919906082768, -0.15880800939172324, 89));
        expect_tol(&t, "silu", si, TOL, V(0, 0.7310585786300049, -0.2689414213699951, 89));
        /* erf(1) = 0.8427007929497149, erf(-1) = -erf(1), erf(89) = 1. */
        expect_tol(&t, "erf", ef, TOL, V(0, 0.8427007929497149, -0.8427007929497149, 1));
        /* e = 2.71828...: bf16 spacing 2^-6 in [2,4): 173.97 steps -> 174*2^-6 = 2.71875;
         * f16 spacing 2^-9: 1391.76 steps -> 1392*2^-9 = 2.71875 too. Exact, not approximate. */
        expect(&t, "exp bf16 rounded", eb, V(2.71875));
        expect(&t, "exp f16 rounded", eh, V(2.71875));
    }
    end(&t);
}

static void test_binary(void)
{
    tcase t;
    begin(&t, "binary");
    ir_value a = in(&t, NC_F32, S(4), V(1, 2, 1.5, -1));
    ir_value b = in(&t, NC_F32, S(4), V(0.5, -3, 4, 0));
    /* bf16 operands, all exact in bf16; the sums are ties: 1 + 2^-8 -> 1 (even),
     * (1 + 2^-7) + 2^-8 -> 1 + 2^-6 (1 + 2^-7 is odd). */
    ir_value ab = in(&t, NC_BF16, S(2), V(1, 1 + 2 * P8));
    ir_value bb = in(&t, NC_BF16, S(2), V(P8, P8));
    /* f16: spacing 2 above 2048, 2049 -> 2048, 2051 -> 2052. */
    ir_value ah = in(&t, NC_F16, S(2), V(2048, 2050));
    ir_value bh = in(&t, NC_F16, S(2), V(1, 1));
    ir_value ai = in(&t, NC_I32, S(3), V(INT32_MAX, INT32_MIN, 65537));
    ir_value bi = in(&t, NC_I32, S(3), V(1, 1, 65537));
    ir_value au = in(&t, NC_U8, S(2), V(200, 3));
    ir_value bu = in(&t, NC_U8, S(2), V(100, 5));
    /* (1+2^-12)^2 = 1 + 2^-11 + 2^-24: half an f32 ulp above 1+2^-11, whose last bit is even: down. */
    ir_value am = in(&t, NC_F32, S(1), V(1 + 1.0 / 4096));
    ir_value add = op(&t, OP_ADD, NOATTR, A(a, b)), sub = op(&t, OP_SUB, NOATTR, A(a, b));
    ir_value mul = op(&t, OP_MUL, NOATTR, A(a, b)), div = op(&t, OP_DIV, NOATTR, A(a, b));
    ir_value addb = op(&t, OP_ADD, NOATTR, A(ab, bb)), addh = op(&t, OP_ADD, NOATTR, A(ah, bh));
    ir_value addi = op(&t, OP_ADD, NOATTR, A(ai, bi)), subi = op(&t, OP_SUB, NOATTR, A(ai, bi));
    ir_value muli = op(&t, OP_MUL, NOATTR, A(ai, bi));
    ir_value addu = op(&t, OP_ADD, NOATTR, A(au, bu)), subu = op(&t, OP_SUB, NOATTR, A(au, bu));
    ir_value mulm = op(&t, OP_MUL, NOATTR, A(am, am));
    if (run(&t)) {
        expect(&t, "add f32", add, V(1.5, -1, 5.5, -1));
        expect(&t, "sub f32", sub, V(0.5, 5, -2.5, -1));
        expect(&t, "mul f32", mul, V(0.5, -6, 6, -0.0));
        expect(&t, "div f32", div, V(2, (double)(float)(-2.0 / 3.0), 0.375, -INFINITY));
        expect(&t, "add bf16 ties", addb, V(1, 1 + 4 * P8));
        expect(&t, "add f16 ties", addh, V(2048, 2052));
        /* INT32_MAX + 1 wraps to INT32_MIN; INT32_MIN - 1 wraps to INT32_MAX;
         * 65537^2 = 2^32 + 2^17 + 1 -> 131073 mod 2^32. */
        expect(&t, "add i32 wraps", addi, V(INT32_MIN, INT32_MIN + 1.0, 131074));
        expect(&t, "sub i32 wraps", subi, V(INT32_MAX - 1.0, INT32_MAX, 0));
        expect(&t, "mul i32 wraps", muli, V(INT32_MAX, INT32_MIN, 131073));
        expect(&t, "add u8 wraps", addu, V(44, 8));       /* 300 mod 256 */
        expect(&t, "sub u8 wraps", subu, V(100, 254));    /* -2 mod 256 */
        expect(&t, "mul f32 rounds once", mulm, V(1 + 1.0 / 2048));
    }
    end(&t);
}

static void test_div_pow_minmax(void)
{
    tcase t;
    begin(&t, "div/pow/maximum/minimum");
    ir_value a = in(&t, NC_F32, S(4), V(1, 1, -1, 0));
    ir_value b = in(&t, NC_F32, S(4), V(4, 0, 0, 0));
    ir_value ai = in(&t, NC_I32, S(5), V(7, -7, 7, 5, INT32_MIN));
    ir_value bi = in(&t, NC_I32, S(5), V(2, 2, -2, 0, -1));
    ir_value pa = in(&t, NC_F32, S(4), V(2, 4, 2, -8));
    ir_value pb = in(&t, NC_F32, S(4), V(10, 0.5, -1, 0.5));
    ir_value ma = in(&t, NC_F32, S(4), V(1, NAN, 3, -5));
    ir_value mb = in(&t, NC_F32, S(4), V(2, 5, NAN, -6));
    ir_value mia = in(&t, NC_I32, S(2), V(3, -4));
    ir_value mib = in(&t, NC_I32, S(2), V(2, 7));
    ir_value d = op(&t, OP_DIV, NOATTR, A(a, b)), di = op(&t, OP_DIV, NOATTR, A(ai, bi));
    ir_value p = op(&t, OP_POW, NOATTR, A(pa, pb));
    ir_value mx = op(&t, OP_MAXIMUM, NOATTR, A(ma, mb)), mn = op(&t, OP_MINIMUM, NOATTR, A(ma, mb));
    ir_value mxi = op(&t, OP_MAXIMUM, NOATTR, A(mia, mib)), mni = op(&t, OP_MINIMUM, NOATTR, A(mia, mib));
    if (run(&t)) {
        expect(&t, "div f32 by zero", d, V(0.25, INFINITY, -INFINITY, NAN));
        /* truncation toward zero; 5/0 -> 0; INT32_MIN/-1 = 2^31 wraps to INT32_MIN */
        expect(&t, "div i32", di, V(3, -3, -3, 0, INT32_MIN));
        /* (-8)^0.5 has no real value: NaN */
        expect(&t, "pow", p, V(1024, 2, 0.5, NAN));
        expect(&t, "maximum NaN wins", mx, V(2, NAN, NAN, -5));
        expect(&t, "minimum NaN wins", mn, V(1, NAN, NAN, -6));
        expect(&t, "maximum i32", mxi, V(3, 7));
        expect(&t, "minimum i32", mni, V(2, -4));
    }
    end(&t);
}

static void test_compare_where(void)
{
    tcase t;
    begin(&t, "compare/where");
    ir_value a = in(&t, NC_F32, S(4), V(1, 2, 3, NAN));
    ir_value b = in(&t, NC_F32, S(4), V(2, 2, 1, NAN));
    ir_value ai = in(&t, NC_I32, S(3), V(1, 5, -7));
    ir_value bi = in(&t, NC_I32, S(3), V(5, 5, -8));
    ir_value eq = op(&t, OP_EQ, NOATTR, A(a, b)), ne = op(&t, OP_NE, NOATTR, A(a, b));
    ir_value lt = op(&t, OP_LT, NOATTR, A(a, b)), le = op(&t, OP_LE, NOATTR, A(a, b));
    ir_value gt = op(&t, OP_GT, NOATTR, A(a, b)), ge = op(&t, OP_GE, NOATTR, A(a, b));
    ir_value lti = op(&t, OP_LT, NOATTR, A(ai, bi)), gei = op(&t, OP_GE, NOATTR, A(ai, bi));
    ir_value eqb = op(&t, OP_EQ, NOATTR, A(lt, le));
    ir_value w = op(&t, OP_WHERE, NOATTR, A(lt, a, b));
    ir_value wi = op(&t, OP_WHERE, NOATTR, A(lti, ai, bi));
    if (run(&t)) {
        /* NaN compares false with everything, != is true. */
        expect(&t, "eq", eq, V(0, 1, 0, 0));
        expect(&t, "ne", ne, V(1, 0, 1, 1));
        expect(&t, "lt", lt, V(1, 0, 0, 0));
        expect(&t, "le", le, V(1, 1, 0, 0));
        expect(&t, "gt", gt, V(0, 0, 1, 0));
        expect(&t, "ge", ge, V(0, 1, 1, 0));
        expect(&t, "lt i32", lti, V(1, 0, 0));
        expect(&t, "ge i32", gei, V(0, 1, 1));
        expect(&t, "eq bool", eqb, V(1, 0, 1, 1));
        if (t.res.values && t.res.values[eq].dtype != NC_BOOL) fail(&t, "compare result is not bool");
        expect(&t, "where f32", w, V(1, 2, 1, NAN));
        expect(&t, "where i32", wi, V(1, 5, -8));
    }
    end(&t);
}

static void test_cast(void)
{
    tcase t;
    begin(&t, "cast");
    ir_value xb = in(&t, NC_F32, S(4), V(1 + P8, 1 + 3 * P8, 3.4e38, -0.0));
    ir_value xh = in(&t, NC_F32, S(3), V(65519, 70000, 3 * ldexp(1, -25)));
    ir_value xi = in(&t, NC_F32, S(6), V(2.7, -2.7, 3e9, -3e9, NAN, INFINITY));
    ir_value xu = in(&t, NC_F32, S(4), V(-1, 255.9, 300, 1.5));
    ir_value xo = in(&t, NC_F32, S(4), V(0, -0.0, 0.1, NAN));
    ir_value ii = in(&t, NC_I32, S(3), V(16777217, 257, -5));
    ir_value iu = in(&t, NC_I32, S(3), V(-5, 300, 7));
    ir_value bf = op(&t, OP_CAST, (ir_attr){.to = NC_BF16}, A(xb));
    ir_value back = op(&t, OP_CAST, (ir_attr){.to = NC_F32}, A(bf));
    ir_value hf = op(&t, OP_CAST, (ir_attr){.to = NC_F16}, A(xh));
    ir_value toi = op(&t, OP_CAST, (ir_attr){.to = NC_I32}, A(xi));
    ir_value tou = op(&t, OP_CAST, (ir_attr){.to = NC_U8}, A(xu));
    ir_value tob = op(&t, OP_CAST, (ir_attr){.to = NC_BOOL}, A(xo));
    ir_value i2f = op(&t, OP_CAST, (ir_attr){.to = NC_F32}, A(ii));
    ir_value i2b = op(&t, OP_CAST, (ir_attr){.to = NC_BF16}, A(ii));
    ir_value i2u = op(&t, OP_CAST, (ir_attr){.to = NC_U8}, A(iu));
    ir_value u2i = op(&t, OP_CAST, (ir_attr){.to = NC_I32}, A(i2u));
    ir_value b2i = op(&t, OP_CAST, (ir_attr){.to = NC_I32}, A(tob));
    ir_value h2b = op(&t, OP_CAST, (ir_attr){.to = NC_BF16}, A(hf));
    if (run(&t)) {
        /* ties to even; 3.4e38 is past the bf16 max 3.3895e38 plus half an ulp: inf */
        expect(&t, "f32->bf16", bf, V(1, 1 + 4 * P8, INFINITY, 0));
        expect(&t, "f32->bf16->f32", back, V(1, 1 + 4 * P8, INFINITY, 0));
        const cpu_tensor *z = value(&t, back);
        if (z && !signbit(z->f[3])) fail(&t, "cast lost the sign of -0");
        /* 65519 < 65520 -> 65504; 70000 -> inf; 3*2^-25 is a subnormal tie -> 2^-23 */
        expect(&t, "f32->f16", hf, V(65504, INFINITY, ldexp(1, -23)));
        expect(&t, "f32->i32 truncates, saturates", toi, V(2, -2, INT32_MAX, INT32_MIN, 0, INT32_MAX));
        expect(&t, "f32->u8", tou, V(0, 255, 255, 1));
        expect(&t, "f32->bool", tob, V(0, 0, 1, 1));
        /* 2^24 + 1 is not an f32: ties to even 2^24; 257 in bf16 ties to 256 */
        expect(&t, "i32->f32", i2f, V(16777216, 257, -5));
        expect(&t, "i32->bf16", i2b, V(16777216, 256, -5));
        expect(&t, "i32->u8 saturates", i2u, V(0, 255, 7));
        expect(&t, "u8->i32", u2i, V(0, 255, 7));
        expect(&t, "bool->i32", b2i, V(0, 0, 1, 1));
        /* 65504 = (2 - 2^-10) * 2^15: bf16 keeps 7 fraction bits and drops 111, more than half: 65536 */
        expect(&t, "f16->bf16", h2b, V(65536, INFINITY, ldexp(1, -23)));
    }
    end(&t);
}

static void test_dropout(void)
{
    enum { N = 10000 };
    tcase t;
    /* without the step operand (inference): the identity */
    begin(&t, "dropout (eval)");
    ir_value x = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 1.5}, S(4), NULL, 0);
    ir_value d = op(&t, OP_DROPOUT, (ir_attr){.f = 0.5, .seed = 7}, A(x));
    if (run(&t)) expect(&t, "dropout identity", d, V(1.5, 1.5, 1.5, 1.5));
    end(&t);

    /* with the step operand (a graph built to train; its @step input):
     * kept elements are 1.5 / (1 - 0.25) = 2 exactly, the others 0 */
    begin(&t, "dropout (training)");
    x = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 1.5}, S(N), NULL, 0);
    ir_value step = in(&t, NC_I32, NULL, 0, V(3));
    cpu_tensor *st = &t.in[t.g->ninputs - 1];
    d = op(&t, OP_DROPOUT, (ir_attr){.f = 0.25, .seed = 7}, A(x, step));
    ir_value xb = op_shaped(&t, OP_FILL, NC_BF16, (ir_attr){.f = 1}, S(64), NULL, 0);
    ir_value db = op(&t, OP_DROPOUT, (ir_attr){.f = 0.1, .seed = 1}, A(xb, step));
    if (ir_step_slot(&t.g->nodes[d]) != 1) fail(&t, "the step is not dropout's step operand");
    float *mask3 = calloc(N, sizeof *mask3);
    if (run(&t)) {
        const cpu_tensor *y = value(&t, d);
        int dropped = 0, bad = 0, rng = 0;
        for (int i = 0; y && i < N; i++) {
            dropped += y->f[i] == 0;
            bad += y->f[i] != 0 && y->f[i] != 2.0f;
            rng += (y->f[i] == 0) != (nc_rng_uniform(7, 3, (uint64_t)i) < 0.25f);
            mask3[i] = y->f[i];
        }
        /* binomial(10000, 0.25): sd 0.0043, so +-0.03 is 7 sd */
        if (!y || dropped < 2200 || dropped > 2800) fail(&t, "dropped %d of %d, expected about 2500", dropped, N);
        if (bad) fail(&t, "%d kept elements are not exactly 2", bad);
        if (rng) fail(&t, "%d elements disagree with nc_rng_uniform(seed, step, i) >= p", rng);
        /* bf16: 1/(1-0.1) = 1.1111 -> 142.2 steps of 2^-7 -> 1.109375 */
        const cpu_tensor *z = value(&t, db);
        int kept = 0;
        for (int i = 0; z && i < 64; i++) {
            kept += z->f[i] != 0;
            if (z->f[i] != 0 && z->f[i] != 1.109375f) {
                fail(&t, "bf16 dropout kept %g, expected 1.109375", z->f[i]);
                break;
            }
        }
        if (kept == 0) fail(&t, "bf16 dropout kept nothing of 64 at p = 0.1");
    }
    /* another step (the input's value, nothing else) draws another mask */
    st->i[0] = 4;
    if (run(&t)) {
        const cpu_tensor *y = value(&t, d);
        int diff = 0;
        for (int i = 0; y && i < N; i++) diff += y->f[i] != mask3[i];
        if (diff < 1000) fail(&t, "steps 3 and 4 differ in %d elements only", diff);
    }
    /* the same step again, the same mask */
    st->i[0] = 3;
    if (run(&t)) {
        const cpu_tensor *y = value(&t, d);
        int diff = 0;
        for (int i = 0; y && i < N; i++) diff += y->f[i] != mask3[i];
        if (diff) fail(&t, "step 3 run twice differs in %d elements", diff);
    }
    /* the step's bits are the stream: -1 is step 2^32 - 1 */
    st->i[0] = -1;
    if (run(&t)) {
        const cpu_tensor *y = value(&t, d);
        int rng = 0;
        for (int i = 0; y && i < N; i++) rng += (y->f[i] == 0) != (nc_rng_uniform(7, 0xffffffffu, (uint64_t)i) < 0.25f);
        if (rng) fail(&t, "step -1: %d elements disagree with stream 2^32 - 1", rng);
    }
    free(mask3);
    end(&t);

    /* the step operand must be an i32 scalar */
    begin(&t, "dropout (bad step)");
    x = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 1.5}, S(4), NULL, 0);
    ir_value fstep = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 3}, NULL, 0, NULL, 0);
    ir_value vstep = in(&t, NC_I32, S(4), NULL, 0);
    tc_error e;
    ir_value out;
    if (ir_build(t.g, &(ir_node){.op = OP_DROPOUT, .attr.f = 0.5}, A(x, fstep), &out, &e) || !strstr(e.msg, "i32 scalar"))
        fail(&t, "an f32 step was accepted");
    tc_error_free(&e);
    if (ir_build(t.g, &(ir_node){.op = OP_DROPOUT, .attr.f = 0.5}, A(x, vstep), &out, &e) || !strstr(e.msg, "i32 scalar"))
        fail(&t, "a step with dims was accepted");
    tc_error_free(&e);
    end(&t);
}

/* ------------------------------------------------------------------ */
/* reductions                                                           */

static ir_attr axes(int n, int a0, int a1, bool keepdim)
{
    ir_attr a = {.naxes = (uint8_t)n, .keepdim = keepdim};
    a.axes[0] = (int8_t)a0;
    a.axes[1] = (int8_t)a1;
    return a;
}

static void test_reductions(void)
{
    tcase t;
    begin(&t, "reductions");
    ir_value x = in(&t, NC_F32, S(2, 3), V(1, 2, 3, 4, 5, 6));
    ir_value x3 = in(&t, NC_F32, S(2, 3, 2), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    /* f32 accumulation would lose every +1 after 2^24; double keeps them */
    ir_value big = in(&t, NC_F32, S(5), V(16777216, 1, 1, 1, 1));
    ir_value xb = in(&t, NC_BF16, S(2), V(1, P8));
    ir_value xi = in(&t, NC_I32, S(2, 2), V(INT32_MAX, 1, -3, 4));
    ir_value xm = in(&t, NC_F32, S(2, 3), V(1, 5, 3, NAN, 0, 2));
    ir_value xmean = in(&t, NC_F32, S(3), V(1, 2, 4));
    ir_value s1 = op(&t, OP_SUM, axes(1, 1, 0, false), A(x));
    ir_value s0 = op(&t, OP_SUM, axes(1, 0, 0, true), A(x));
    ir_value sall = op(&t, OP_SUM, NOATTR, A(x));
    ir_value smid = op(&t, OP_SUM, axes(1, 1, 0, false), A(x3));
    ir_value sneg = op(&t, OP_SUM, axes(2, -1, 0, false), A(x3));
    ir_value sbig = op(&t, OP_SUM, NOATTR, A(big));
    ir_value sb = op(&t, OP_SUM, NOATTR, A(xb));
    ir_value si = op(&t, OP_SUM, axes(1, 1, 0, false), A(xi));
    ir_value m1 = op(&t, OP_MEAN, axes(1, 1, 0, false), A(x));
    ir_value mall = op(&t, OP_MEAN, NOATTR, A(xmean));
    ir_value mx1 = op(&t, OP_MAX, axes(1, 1, 0, false), A(xm));
    ir_value mx0 = op(&t, OP_MAX, axes(1, 0, 0, true), A(xm));
    ir_value mxi = op(&t, OP_MAX, axes(1, 0, 0, false), A(xi));
    ir_value mxmid = op(&t, OP_MAX, axes(1, 1, 0, false), A(x3));   /* as a max pool: not the last axis */
    ir_value xz = in(&t, NC_F32, S(2, 2), V(-0.0, 0.0, 0.0, -0.0));
    ir_value mxz = op(&t, OP_MAX, axes(1, 1, 0, false), A(xz));
    /* a NaN in a middle axis wins as in the last: the first one met */
    ir_value xn = in(&t, NC_F32, S(1, 3, 2), V(1, -NAN, NAN, 2, 3, NAN));
    ir_value mxn = op(&t, OP_MAX, axes(1, 1, 0, false), A(xn));
    ir_value mmid = op(&t, OP_MEAN, axes(1, 1, 0, false), A(x3));
    ir_value sfront = op(&t, OP_SUM, axes(2, 0, 1, false), A(x3));   /* all but the last: a bias's gradient */
    if (run(&t)) {
        const cpu_tensor *n = value(&t, mxn);
        if (n && (!isnan(n->f[0]) || signbit(n->f[0]) || !isnan(n->f[1]) || !signbit(n->f[1])))
            fail(&t, "max middle axis with NaNs: got %g %g, expected nan -nan", n->f[0], n->f[1]);
        expect(&t, "mean middle axis", mmid, V(2, 3, 8, 9));
        /* over i, j: 6i + 2j + k summed: (0 + 6) * 3 + (0 + 2 + 4) * 2 + 6k */
        expect(&t, "sum leading axes", sfront, V(30, 36));
        expect(&t, "max middle axis", mxmid, V(4, 5, 10, 11));
        const cpu_tensor *z = value(&t, mxz);   /* a > b or b: the later zero of a tie */
        if (z && (signbit(z->f[0]) || !signbit(z->f[1])))
            fail(&t, "max of zeros: got %g %g, expected 0 -0", z->f[0], z->f[1]);
        expect(&t, "sum axis 1", s1, V(6, 15));
        expect(&t, "sum axis 0 keepdim", s0, V(5, 7, 9));
        expect_shape(&t, "sum keepdim shape", s0, S(1, 3));
        expect(&t, "sum all", sall, V(21));
        expect_shape(&t, "sum all is a scalar", sall, NULL, 0);
        /* x3[i, j, k] = 6i + 2j + k; over j: 6i*3 + (0+2+4) + 3k */
        expect(&t, "sum middle axis", smid, V(6, 9, 24, 27));
        expect_shape(&t, "sum middle axis shape", smid, S(2, 2));
        /* axes {-1, 0} = {0, 2}: over i, k: 4*2j + (0+6)*2 + (0+1)*2 = 8j + 14 */
        expect(&t, "sum axes -1, 0", sneg, V(14, 22, 30));
        expect(&t, "sum in double", sbig, V(16777220));
        expect(&t, "sum bf16 rounds once", sb, V(1));   /* 1 + 2^-8 is a tie: 1 */
        expect(&t, "sum i32 wraps", si, V(INT32_MIN, 1));
        expect(&t, "mean axis 1", m1, V(2, 5));
        expect(&t, "mean", mall, V((double)(float)(7.0 / 3.0)));
        expect(&t, "max axis 1, NaN wins", mx1, V(5, NAN));
        expect(&t, "max axis 0", mx0, V(NAN, 5, 3));
        expect(&t, "max i32", mxi, V(INT32_MAX, 4));
    }
    end(&t);
}

/* ------------------------------------------------------------------ */
/* row-wise                                                             */

static void test_softmax(void)
{
    tcase t;
    begin(&t, "softmax");
    ir_value x = in(&t, NC_F32, S(3, 3), V(1, 2, 3, 1000, 1000, -INFINITY, 0, 0, 0));
    ir_value xb = in(&t, NC_BF16, S(2), V(0, 0));
    ir_value sm = op(&t, OP_SOFTMAX, NOATTR, A(x)), lsm = op(&t, OP_LOG_SOFTMAX, NOATTR, A(x));
    ir_value smb = op(&t, OP_SOFTMAX, NOATTR, A(xb));
    if (run(&t)) {
        /* e^k / (e + e^2 + e^3); the 1000s would overflow exp without the max subtracted */
        expect_tol(&t, "softmax", sm, TOL,
                   V(0.09003057317038046, 0.24472847105479767, 0.6652409557748219, 0.5, 0.5, 0,
                     1.0 / 3, 1.0 / 3, 1.0 / 3));
        /* k - log(e + e^2 + e^3) = k - 3.40760596 */
        expect_tol(&t, "log_softmax", lsm, TOL,
                   V(-2.40760596444438, -1.4076059644443801, -0.40760596444438013, -0.69314718055994531,
                     -0.69314718055994531, -INFINITY, -1.0986122886681098, -1.0986122886681098,
                     -1.0986122886681098));
        expect(&t, "softmax bf16", smb, V(0.5, 0.5));
        const cpu_tensor *y = value(&t, sm);
        for (int r = 0; y && r < 3; r++) {
            double s = 0;
            for (int j = 0; j < 3; j++) s += y->f[r * 3 + j];
            if (fabs(s - 1) > 1e-6) fail(&t, "softmax row %d sums to %.9g", r, s);
        }
    }
    end(&t);
}

static void test_norms(void)
{
    tcase t;
    begin(&t, "layernorm/rmsnorm");
    ir_value x = in(&t, NC_F32, S(2, 4), V(1, 2, 3, 4, 5, 5, 5, 5));
    ir_value w = in(&t, NC_F32, S(4), V(1, 1, 2, 2));
    ir_value b = in(&t, NC_F32, S(4), V(0, 0, 0, 1));
    ir_value xr = in(&t, NC_F32, S(1, 2), V(3, 4));
    ir_value wr = in(&t, NC_F32, S(2), V(1, 2));
    ir_value ln = op(&t, OP_LAYERNORM, (ir_attr){.f = 0.75}, A(x, w, b));
    ir_value rn = op(&t, OP_RMSNORM, (ir_attr){.f = 0.5}, A(xr, wr));
    if (run(&t)) {
        /* row 1: mean 2.5, biased var (2.25+0.25+0.25+2.25)/4 = 1.25, + eps 0.75 = 2:
         * (x - 2.5)/sqrt(2) = -1.06066017, -0.35355339, 0.35355339, 1.06066017; then *w + b.
         * row 2: constant, var 0: (x - mean) = 0, so the result is b. */
        expect_tol(&t, "layernorm", ln, TOL,
                   V(-1.0606601717798212, -0.35355339059327373, 0.70710678118654746, 3.1213203435596424, 0, 0, 0, 1));
        /* mean(x^2) = (9 + 16)/2 = 12.5, + 0.5 = 13: 3/sqrt(13), 4/sqrt(13)*2 */
        expect_tol(&t, "rmsnorm", rn, TOL, V(0.8320502943378437, 2.2188007849009166));
    }
    end(&t);
}

static void test_cross_entropy(void)
{
    tcase t;
    begin(&t, "cross_entropy");
    ir_value lg = in(&t, NC_F32, S(2, 3), V(0, 0, 0, 1, 2, 3));
    ir_value tg = in(&t, NC_I32, S(2), V(0, 2));
    ir_value lgb = in(&t, NC_BF16, S(2, 3), V(0, 0, 0, 1, 2, 3));
    ir_value ce = op(&t, OP_CROSS_ENTROPY, NOATTR, A(lg, tg));
    ir_value ces = op(&t, OP_CROSS_ENTROPY, (ir_attr){.f = 0.1}, A(lg, tg));
    ir_value ceb = op(&t, OP_CROSS_ENTROPY, NOATTR, A(lgb, tg));
    if (run(&t)) {
        /* row 1: uniform over 3, -logp = ln 3 = 1.09861229 for every class.
         * row 2: lse = log(e + e^2 + e^3) = 3.40760596; -logp[2] = 0.40760596.
         * mean = (1.09861229 + 0.40760596) / 2 = 0.75310913 */
        expect_tol(&t, "cross_entropy", ce, TOL, V(0.753109126556245));
        /* smoothing 0.1: row 1 stays ln 3 (all classes equal). row 2: mean_c(-logp) =
         * (2.40760596 + 1.40760596 + 0.40760596)/3 = 1.40760596; 0.9*0.40760596 + 0.1*1.40760596
         * = 0.50760596; mean = (1.09861229 + 0.50760596)/2 = 0.80310913 */
        expect_tol(&t, "cross_entropy smoothing", ces, TOL, V(0.8031091265562449));
        expect_tol(&t, "cross_entropy bf16 logits", ceb, TOL, V(0.753109126556245));
        if (t.res.values && (t.res.values[ceb].dtype != NC_F32 || t.res.values[ceb].rank != 0))
            fail(&t, "cross_entropy result is not an f32 scalar");
    }
    end(&t);

    /* the fused backward: (softmax - (1-s) onehot - s/C) * g / rows, g 1 over 2 rows */
    begin(&t, "cross_entropy_grad");
    lg = in(&t, NC_F32, S(2, 3), V(0, 0, 0, 1, 2, 3));
    tg = in(&t, NC_I32, S(2), V(0, 2));
    ir_value seed = in(&t, NC_F32, NULL, 0, V(1.0));
    ir_value gr = op(&t, OP_CROSS_ENTROPY_GRAD, NOATTR, A(lg, tg, seed));
    ir_value grs = op(&t, OP_CROSS_ENTROPY_GRAD, (ir_attr){.f = 0.1}, A(lg, tg, seed));
    if (run(&t)) {
        /* row 1: p = 1/3 each; row 2: softmax(1, 2, 3) = 0.09003057, 0.24472847, 0.66524096 */
        expect_tol(&t, "cross_entropy_grad", gr, TOL,
                   V(-0.33333333333333337, 0.16666666666666666, 0.16666666666666666, 0.04501528658519023,
                     0.12236423552739882, -0.1673795221125891));
        expect_tol(&t, "cross_entropy_grad smoothing", grs, TOL,
                   V(-0.3, 0.15, 0.15, 0.028348619918523565, 0.10569756886073216, -0.13404618877925578));
    }
    end(&t);

    /* the backward of layernorm / rmsnorm (eps 0) for x = (1, 2, 4), w = (1, 0.5, 2),
     * g = (1, -1, 0.5): rstd (g w - mean(g w) - xhat mean(g w xhat)) */
    begin(&t, "norm_grad");
    ir_value nx = in(&t, NC_F32, S(1, 3), V(1, 2, 4));
    ir_value nw = in(&t, NC_F32, S(3), V(1, 0.5, 2));
    ir_value ng = in(&t, NC_F32, S(1, 3), V(1, -1, 0.5));
    ir_value lng = op(&t, OP_LAYERNORM_GRAD, NOATTR, A(nx, nw, ng));
    ir_value rmg = op(&t, OP_RMSNORM_GRAD, NOATTR, A(nx, nw, ng));
    if (run(&t)) {
        expect_tol(&t, "layernorm_grad", lng, TOL, V(0.5154323951168184, -0.7731485926752277, 0.2577161975584093));
        expect_tol(&t, "rmsnorm_grad", rmg, TOL, V(0.3059712400550887, -0.3329687024128906, 0.0899915411926732));
    }
    end(&t);

    /* a norm's parameter gradients over two rows (eps 0): sum of g (bias), of g xhat for layernorm
     * (wrt 1) and rmsnorm (wrt 2) */
    begin(&t, "norm_param_grad");
    ir_value px = in(&t, NC_F32, S(2, 3), V(1, 2, 4, 0, 3, 3));
    ir_value pg = in(&t, NC_F32, S(2, 3), V(1, -1, 0.5, 2, 0, -1));
    ir_value pb = op(&t, OP_NORM_PARAM_GRAD, (ir_attr){.axis = 0}, A(px, pg));
    ir_value plw = op(&t, OP_NORM_PARAM_GRAD, (ir_attr){.axis = 1}, A(px, pg));
    ir_value prw = op(&t, OP_NORM_PARAM_GRAD, (ir_attr){.axis = 2}, A(px, pg));
    if (run(&t)) {
        expect_tol(&t, "bias", pb, TOL, V(3, -1, -0.5));
        expect_tol(&t, "layernorm weight", plw, TOL, V(-3.897472092395888, 0.2672612419124245, -0.038953676405486526));
        expect_tol(&t, "rmsnorm weight", prw, TOL, V(0.3779644730092272, -0.7559289460184544, -0.46881592537313477));
    }
    end(&t);

    /* gelu_tanh's backward: g times the derivative of 0.5 x (1 + tanh(k (x + 0.044715 x^3))) */
    begin(&t, "gelu_tanh_grad");
    ir_value gx = in(&t, NC_F32, S(4), V(-2, -0.5, 0, 1.5));
    ir_value gg = in(&t, NC_F32, S(4), V(1, 2, -1, 0.5));
    ir_value gtg = op(&t, OP_GELU_TANH_GRAD, NOATTR, A(gx, gg));
    if (run(&t)) expect_tol(&t, "gelu_tanh_grad", gtg, TOL, V(-0.08609925662361825, 0.2652601929307153, -0.5, 0.5638553965757166));
    end(&t);

    /* GELU's tails, relative to the value: x Phi(x) with Phi as erfc and the
     * tanh form as x sigmoid(2u) keep every digit where 1 + erf(x / sqrt 2)
     * and 1 + tanh(u) cancel to rounding noise or to nothing (x = -9) */
    begin(&t, "gelu tails");
    ir_value tx = in(&t, NC_F32, S(2), V(-6, -9));
    ir_value tones = in(&t, NC_F32, S(2), V(1, 1));
    ir_value tge = op(&t, OP_GELU, NOATTR, A(tx)), tgt = op(&t, OP_GELU_TANH, NOATTR, A(tx));
    ir_value tgg = op(&t, OP_GELU_GRAD, NOATTR, A(tx, tones)), tgtg = op(&t, OP_GELU_TANH_GRAD, NOATTR, A(tx, tones));
    if (run(&t)) {
        expect_rel(&t, "gelu", tge, 1e-6, V(-5.919525870226207e-09, -1.015729565358458e-18));
        expect_rel(&t, "gelu_tanh", tgt, 1e-6, V(-8.43964670076231e-11, -1.336459594734881e-28));
        expect_rel(&t, "gelu_grad", tgg, 1e-6, V(-3.5468709453902015e-08, -9.13893737390664e-18));
        expect_rel(&t, "gelu_tanh_grad", tgtg, 1e-6, V(-7.709973930953707e-10, -2.515735285067441e-27));
    }
    end(&t);

    /* gelu's backward: g (Phi(x) + x phi(x)) */
    begin(&t, "gelu_grad");
    ir_value ex = in(&t, NC_F32, S(4), V(-2, -0.5, 0, 1.5));
    ir_value eg = in(&t, NC_F32, S(4), V(1, 2, -1, 0.5));
    ir_value egg = op(&t, OP_GELU_GRAD, NOATTR, A(ex, eg));
    if (run(&t)) expect_tol(&t, "gelu_grad", egg, TOL, V(-0.0852318010781969, 0.26500975068767424, -0.5, 0.5637345961149898));
    end(&t);

    /* the fused backward of softmax, from its output: y * (g - sum(g * y)) */
    begin(&t, "softmax_grad");
    ir_value y = in(&t, NC_F32, S(1, 3), V(0.09003057317038046, 0.24472847105479764, 0.6652409557748218));
    ir_value g = in(&t, NC_F32, S(1, 3), V(1, 0, -1));
    ir_value sg = op(&t, OP_SOFTMAX_GRAD, NOATTR, A(y, g));
    ir_value ly = in(&t, NC_F32, S(1, 3), V(-2.4076059644443806, -1.4076059644443804, -0.4076059644443804));
    ir_value g2 = in(&t, NC_F32, S(1, 3), V(1, 1, 0));
    ir_value lsg = op(&t, OP_LOG_SOFTMAX_GRAD, NOATTR, A(ly, g2));
    if (run(&t)) {
        expect_tol(&t, "softmax_grad", sg, TOL, V(0.14181709360981215, 0.1407703574696301, -0.2825874510794423));
        /* log_softmax: g - exp(y) * sum(g), sum(g) = 2 */
        expect_tol(&t, "log_softmax_grad", lsg, TOL, V(0.8199388536592391, 0.5105430578904047, -1.3304819115496436));
    }
    end(&t);

    /* attention over two queries and keys (identity q and k, scale 1):
     * scores [[1, 0], [0, 1]], softmax rows (0.7311, 0.2689) and mirrored */
    begin(&t, "attention");
    ir_value aq = in(&t, NC_F32, S(1, 2, 2), V(1, 0, 0, 1));
    ir_value ak = in(&t, NC_F32, S(1, 2, 2), V(1, 0, 0, 1));
    ir_value av = in(&t, NC_F32, S(1, 2, 1), V(1, 3));
    ir_value ag = in(&t, NC_F32, S(1, 2, 1), V(1, 0.5));
    ir_value at = op(&t, OP_ATTENTION, (ir_attr){.f = 1}, A(aq, ak, av));
    ir_value atc = op(&t, OP_ATTENTION, (ir_attr){.f = 1, .causal = true}, A(aq, ak, av));
    ir_value alse = op(&t, OP_ATTENTION_LSE, (ir_attr){.f = 1}, A(aq, ak));
    ir_value adelta = in(&t, NC_F32, S(1, 2, 1), V(1.5378828427399902, 1.231058578630005));
    ir_value adq = op(&t, OP_ATTENTION_GRAD, (ir_attr){.f = 1, .axis = 0}, A(aq, ak, av, ag, alse, adelta));
    ir_value adk = op(&t, OP_ATTENTION_GRAD, (ir_attr){.f = 1, .axis = 1}, A(aq, ak, av, ag, alse, adelta));
    ir_value adv = op(&t, OP_ATTENTION_GRAD, (ir_attr){.f = 1, .axis = 2}, A(aq, ak, av, ag, alse, adelta));
    if (run(&t)) {
        expect_tol(&t, "attention", at, TOL, V(1.5378828427399902, 2.46211715726001));
        expect_tol(&t, "attention causal: the first query sees only the first key", atc, TOL, V(1, 2.46211715726001));
        expect_tol(&t, "attention_lse", alse, TOL, V(1.3132616875182228, 1.3132616875182228));
        expect_tol(&t, "attention_grad q", adq, TOL,
                   V(-0.3932238664829637, 0.3932238664829637, -0.19661193324148188, 0.19661193324148177));
        expect_tol(&t, "attention_grad k", adk, TOL,
                   V(-0.3932238664829637, -0.19661193324148188, 0.3932238664829637, 0.19661193324148177));
        expect_tol(&t, "attention_grad v", adv, TOL, V(0.8655292893150024, 0.6344707106849976));
    }
    end(&t);

    begin(&t, "cross_entropy (bad target)");
    lg = in(&t, NC_F32, S(2, 3), V(0, 0, 0, 1, 2, 3));
    tg = in(&t, NC_I32, S(2), V(0, 3));
    op(&t, OP_CROSS_ENTROPY, NOATTR, A(lg, tg));
    run_expect_error(&t, "cross_entropy: target 3 out of range [0, 3)");
    end(&t);
}

/* ------------------------------------------------------------------ */
/* matmul                                                               */

/* Naive attention of one head in double over its first n keys (n clamped
 * to [0, S], as the kernels do): out [T, E], lse [T], and from g and delta
 * the gradients dq [T, D], dk [S, D], dv [S, E] (keys past n: zeros). */
typedef struct naive_attn {
    int T, S, D, E;
    bool causal;
    double scale;
} naive_attn;

static void naive_attention(const naive_attn *a, int n, const double *q, const double *k, const double *v, const double *g,
                            double *out, double *lse, double *dq, double *dk, double *dv)
{
    n = n < 0 ? 0 : n > a->S ? a->S : n;
    double p[8][8], dl[8];
    for (int i = 0; i < a->T * a->E; i++) out[i] = 0;
    for (int i = 0; i < a->T * a->D; i++) dq[i] = 0;
    for (int i = 0; i < a->S * a->D; i++) dk[i] = 0;
    for (int i = 0; i < a->S * a->E; i++) dv[i] = 0;
    for (int i = 0; i < a->T; i++) {
        double m = -INFINITY, l = 0;
        for (int j = 0; j < a->S; j++) {
            double s = 0;
            for (int x = 0; x < a->D; x++) s += q[i * a->D + x] * k[j * a->D + x];
            p[i][j] = j < n && !(a->causal && j > i) ? s * a->scale : -INFINITY;
            m = fmax(m, p[i][j]);
        }
        for (int j = 0; j < a->S; j++) l += m == -INFINITY ? 0 : exp(p[i][j] - m);
        lse[i] = m + log(l);
        dl[i] = 0;
        for (int j = 0; j < a->S; j++) {
            p[i][j] = l > 0 ? exp(p[i][j] - lse[i]) : 0;
            for (int x = 0; x < a->E; x++) out[i * a->E + x] += p[i][j] * v[j * a->E + x];
        }
        for (int x = 0; x < a->E; x++) dl[i] += g[i * a->E + x] * out[i * a->E + x];
    }
    for (int i = 0; i < a->T; i++)
        for (int j = 0; j < a->S; j++) {
            double dp = 0;
            for (int x = 0; x < a->E; x++) dp += g[i * a->E + x] * v[j * a->E + x], dv[j * a->E + x] += p[i][j] * g[i * a->E + x];
            double ds = p[i][j] * (dp - dl[i]) * a->scale;
            for (int x = 0; x < a->D; x++) dq[i * a->D + x] += ds * k[j * a->D + x], dk[j * a->D + x] += ds * q[i * a->D + x];
        }
}

/* Attention with key lengths against naive_attention: lengths over
 * [B] (one for both heads) and over [B, H], causal or not, with lengths
 * of 0 (zeros, zero gradients), inside, at and past S (clamped) and
 * negative (as 0). */
static void test_attention_lengths(void)
{
    enum { B = 2, H = 2, T = 5, SK = 5, D = 4, E = 3 };
    static double q[B * H * T * D], k[B * H * SK * D], v[B * H * SK * E], g[B * H * T * E];
    for (int i = 0; i < B * H * T * D; i++) q[i] = sin(0.7 * i + 0.3);
    for (int i = 0; i < B * H * SK * D; i++) k[i] = cos(1.3 * i);
    for (int i = 0; i < B * H * SK * E; i++) v[i] = sin(0.37 * i) * 2;
    for (int i = 0; i < B * H * T * E; i++) g[i] = cos(0.91 * i + 1);
    static const int lens_b[B] = {3, 9}, lens_bh[B * H] = {0, 2, -1, 5};
    for (int form = 0; form < 4; form++) {
        bool causal = form & 1, per_head = form & 2;
        tcase t;
        char name[64];
        snprintf(name, sizeof name, "attention lengths%s%s", per_head ? " [B, H]" : " [B]", causal ? " causal" : "");
        begin(&t, name);
        ir_value aq = in(&t, NC_F32, S(B, H, T, D), q, B * H * T * D), ak = in(&t, NC_F32, S(B, H, SK, D), k, B * H * SK * D);
        ir_value av = in(&t, NC_F32, S(B, H, SK, E), v, B * H * SK * E), ag = in(&t, NC_F32, S(B, H, T, E), g, B * H * T * E);
        ir_value al = per_head ? in(&t, NC_I32, S(B, H), V(0, 2, -1, 5)) : in(&t, NC_I32, S(B), V(3, 9));
        ir_attr at = {.f = 0.5, .causal = causal};
        ir_value out = op(&t, OP_ATTENTION, at, A(aq, ak, av, al));
        ir_value lse = op(&t, OP_ATTENTION_LSE, at, A(aq, ak, al));
        static double want[5][B * H * SK * D], wlse[B * H * T], delta[B * H * T];
        naive_attn na = {T, SK, D, E, causal, 0.5};
        for (int h = 0; h < B * H; h++) {
            double o[T * E], dq[T * D], dk[SK * D], dv[SK * E];
            naive_attention(&na, per_head ? lens_bh[h] : lens_b[h / H], q + h * T * D, k + h * SK * D, v + h * SK * E, g + h * T * E, o,
                            wlse + h * T, dq, dk, dv);
            memcpy(want[0] + h * T * E, o, sizeof o), memcpy(want[1] + h * T * D, dq, sizeof dq);
            memcpy(want[2] + h * SK * D, dk, sizeof dk), memcpy(want[3] + h * SK * E, dv, sizeof dv);
            for (int i = 0; i < T; i++) {
                delta[h * T + i] = 0;
                for (int x = 0; x < E; x++) delta[h * T + i] += g[(h * T + i) * E + x] * o[i * E + x];
            }
        }
        ir_value adelta = in(&t, NC_F32, S(B, H, T, 1), delta, B * H * T);
        ir_value grads[3];
        for (int wrt = 0; wrt < 3; wrt++) {
            ir_attr ga = at;
            ga.axis = wrt;
            grads[wrt] = op(&t, OP_ATTENTION_GRAD, ga, A(aq, ak, av, ag, lse, adelta, al));
        }
        if (run(&t)) {
            expect_tol(&t, "out", out, TOL, want[0], B * H * T * E);
            expect_tol(&t, "lse (-inf: no key seen)", lse, TOL, wlse, B * H * T);
            expect_tol(&t, "dq", grads[0], TOL, want[1], B * H * T * D);
            expect_tol(&t, "dk", grads[1], TOL, want[2], B * H * SK * D);
            expect_tol(&t, "dv", grads[2], TOL, want[3], B * H * SK * E);
        }
        end(&t);
    }
}

static void test_matmul(void)
{
    tcase t;
    begin(&t, "matmul");
    /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] */
    ir_value a = in(&t, NC_F32, S(2, 3), V(1, 2, 3, 4, 5, 6));
    ir_value b = in(&t, NC_F32, S(3, 2), V(7, 8, 9, 10, 11, 12));
    ir_value at = in(&t, NC_F32, S(3, 2), V(1, 4, 2, 5, 3, 6));      /* a stored transposed */
    ir_value bt = in(&t, NC_F32, S(2, 3), V(7, 9, 11, 8, 10, 12));   /* b stored transposed */
    /* batch 0: a0 x I = a0; batch 1: a1 x swap = columns swapped */
    ir_value ab = in(&t, NC_F32, S(2, 2, 2), V(1, 2, 3, 4, 5, 6, 7, 8));
    ir_value bb = in(&t, NC_F32, S(2, 2, 2), V(1, 0, 0, 1, 0, 1, 1, 0));
    ir_value m2 = in(&t, NC_F32, S(2, 2), V(1, 1, 0, 1));
    /* bf16: 1*1 + 2^-8*1 = 1 + 2^-8, a tie: 1 */
    ir_value a16 = in(&t, NC_BF16, S(1, 2), V(1, P8));
    ir_value b16 = in(&t, NC_BF16, S(2, 1), V(1, 1));
    ir_value y = op(&t, OP_MATMUL, NOATTR, A(a, b));
    ir_value yta = op(&t, OP_MATMUL, (ir_attr){.ta = true}, A(at, b));
    ir_value ytb = op(&t, OP_MATMUL, (ir_attr){.tb = true}, A(a, bt));
    ir_value ytab = op(&t, OP_MATMUL, (ir_attr){.ta = true, .tb = true}, A(at, bt));
    ir_value yb = op(&t, OP_MATMUL, NOATTR, A(ab, bb));
    ir_value ybc = op(&t, OP_MATMUL, NOATTR, A(ab, m2));
    ir_value ybta = op(&t, OP_MATMUL, (ir_attr){.ta = true}, A(ab, m2));
    ir_value y16 = op(&t, OP_MATMUL, NOATTR, A(a16, b16));
    if (run(&t)) {
        expect(&t, "matmul", y, V(58, 64, 139, 154));
        expect(&t, "matmul ta", yta, V(58, 64, 139, 154));
        expect(&t, "matmul tb", ytb, V(58, 64, 139, 154));
        expect(&t, "matmul ta tb", ytab, V(58, 64, 139, 154));
        expect(&t, "matmul batch", yb, V(1, 2, 3, 4, 6, 5, 8, 7));
        /* [[1,2],[3,4]] x [[1,1],[0,1]] = [[1,3],[3,7]]; [[5,6],[7,8]] -> [[5,11],[7,15]] */
        expect(&t, "matmul batch x matrix", ybc, V(1, 3, 3, 7, 5, 11, 7, 15));
        expect_shape(&t, "matmul batch x matrix", ybc, S(2, 2, 2));
        /* a0^T = [[1,3],[2,4]] -> [[1,4],[2,6]]; a1^T = [[5,7],[6,8]] -> [[5,12],[6,14]] */
        expect(&t, "matmul batch ta x matrix", ybta, V(1, 4, 2, 6, 5, 12, 6, 14));
        expect(&t, "matmul bf16 rounds", y16, V(1));
    }
    end(&t);
}

/* Larger shapes against a plain triple loop; small integers keep every sum exact. */
static void test_matmul_sizes(void)
{
    tcase t;
    begin(&t, "matmul (sizes)");
    enum { B = 3, M = 5, K = 7, N = 4 };
    double av[B * M * K], bv[B * K * N], want[B * M * N], want_flat[B * M * N];
    for (int i = 0; i < B * M * K; i++) av[i] = (i * 7 % 11) - 5;
    for (int i = 0; i < B * K * N; i++) bv[i] = (i * 5 % 9) - 4;
    for (int bi = 0; bi < B; bi++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double s = 0, s2 = 0;
                for (int k = 0; k < K; k++) {
                    s += av[(bi * M + m) * K + k] * bv[(bi * K + k) * N + n];
                    s2 += av[(bi * M + m) * K + k] * bv[k * N + n];
                }
                want[(bi * M + m) * N + n] = s;
                want_flat[(bi * M + m) * N + n] = s2;
            }
    ir_value a = in(&t, NC_F32, S(B, M, K), av, B * M * K);
    ir_value b = in(&t, NC_F32, S(B, K, N), bv, B * K * N);
    ir_value b2 = in(&t, NC_F32, S(K, N), bv, K * N);
    ir_value y = op(&t, OP_MATMUL, NOATTR, A(a, b));
    ir_value y2 = op(&t, OP_MATMUL, NOATTR, A(a, b2));
    if (run(&t)) {
        expect(&t, "batched", y, want, B * M * N);
        expect(&t, "flattened batch", y2, want_flat, B * M * N);
    }
    end(&t);
}

/* Operands stored transposed, over more rows than the BLAS-less product
 * takes at a time (8) and a remainder: A [M, K] or [K, M] times B [N, K]. */
static void test_matmul_transposed_sizes(void)
{
    tcase t;
    begin(&t, "matmul (transposed, sizes)");
    enum { M = 19, K = 9, N = 6 };
    double av[M * K], at_v[K * M], bt_v[N * K], want[M * N];
    for (int i = 0; i < M * K; i++) av[i] = (i * 7 % 13) - 6;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) at_v[k * M + m] = av[m * K + k];
    for (int i = 0; i < N * K; i++) bt_v[i] = (i * 5 % 11) - 5;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += av[m * K + k] * bt_v[n * K + k];
            want[m * N + n] = s;
        }
    ir_value a = in(&t, NC_F32, S(M, K), av, M * K);
    ir_value at = in(&t, NC_F32, S(K, M), at_v, K * M);
    ir_value bt = in(&t, NC_F32, S(N, K), bt_v, N * K);
    ir_value ytb = op(&t, OP_MATMUL, (ir_attr){.tb = true}, A(a, bt));
    ir_value ytab = op(&t, OP_MATMUL, (ir_attr){.ta = true, .tb = true}, A(at, bt));
    if (run(&t)) {
        expect(&t, "tb", ytb, want, M * N);
        expect(&t, "ta tb", ytab, want, M * N);
    }
    end(&t);
}

/* ------------------------------------------------------------------ */
/* data movement                                                        */

static void test_transpose_reshape(void)
{
    tcase t;
    begin(&t, "transpose/reshape/copy");
    ir_value x = in(&t, NC_F32, S(2, 3), V(1, 2, 3, 4, 5, 6));
    ir_value x3 = in(&t, NC_I32, S(2, 2, 3), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    ir_attr perm = {.naxes = 3};
    perm.axes[0] = 2, perm.axes[1] = 0, perm.axes[2] = 1;
    ir_value tr = op(&t, OP_TRANSPOSE, NOATTR, A(x));
    ir_value tp = op(&t, OP_TRANSPOSE, perm, A(x3));
    ir_value rs = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(3, 1, 2), A(x));
    ir_value cp = op(&t, OP_COPY, NOATTR, A(x3));
    if (run(&t)) {
        expect(&t, "transpose last two", tr, V(1, 4, 2, 5, 3, 6));
        expect_shape(&t, "transpose last two", tr, S(3, 2));
        /* out[i, j, k] = in[j, k, i] = 6j + 3k + i, out shape (3, 2, 2) */
        expect(&t, "transpose perm [2, 0, 1]", tp, V(0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11));
        expect_shape(&t, "transpose perm", tp, S(3, 2, 2));
        expect(&t, "reshape", rs, V(1, 2, 3, 4, 5, 6));
        expect_shape(&t, "reshape", rs, S(3, 1, 2));
        expect(&t, "copy", cp, V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
        expect_shape(&t, "copy", cp, S(2, 2, 3));
    }
    end(&t);
}

/* x[:, 1 : T+1] with T a symbol; bound to 3 it fits, bound to 5 it runs past the axis. */
static void build_sym_slice(tcase *t, ir_value *x, ir_value *y, ir_value *y0)
{
    int T = ir_sym_add(t->g, "T");
    *x = in(t, NC_F32, S(2, 5), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    dim_expr ts = dim_sym(T), one = dim_const(1), hi;
    dim_add(&ts, &one, &hi);
    ir_attr a = {.axis = -1, .lo = ir_dim_const(t->g, 1), .hi = ir_dim_intern(t->g, &hi)};
    *y = op(t, OP_SLICE, a, A(*x));
    ir_attr r = {.axis = 0, .lo = ir_dim_const(t->g, 1), .hi = ir_dim_const(t->g, 2)};
    *y0 = op(t, OP_SLICE, r, A(*x));
}

static void test_slice(void)
{
    tcase t;
    ir_value x, y, y0;
    begin(&t, "slice");
    build_sym_slice(&t, &x, &y, &y0);
    t.syms[0] = 3;
    if (run(&t)) {
        expect(&t, "slice [1, T+1) at T=3", y, V(1, 2, 3, 6, 7, 8));
        expect_shape(&t, "slice shape", y, S(2, 3));
        expect(&t, "slice rows [1, 2)", y0, V(5, 6, 7, 8, 9));
    }
    t.syms[0] = 5;
    run_expect_error(&t, "slice: range [1, 6) out of bounds for an axis of size 5");
    end(&t);
}

static void test_concat(void)
{
    tcase t;
    begin(&t, "concat");
    ir_value a = in(&t, NC_F32, S(2, 1), V(1, 2));
    ir_value b = in(&t, NC_F32, S(2, 2), V(3, 4, 5, 6));
    ir_value c = in(&t, NC_I32, S(1, 2), V(7, 8));
    ir_value d = in(&t, NC_I32, S(2, 2), V(1, 2, 3, 4));
    ir_value y1 = op(&t, OP_CONCAT, (ir_attr){.axis = 1}, A(a, b));
    ir_value y0 = op(&t, OP_CONCAT, (ir_attr){.axis = 0}, A(c, d, c));
    if (run(&t)) {
        expect(&t, "concat axis 1", y1, V(1, 3, 4, 2, 5, 6));
        expect_shape(&t, "concat axis 1", y1, S(2, 3));
        expect(&t, "concat axis 0, three operands", y0, V(7, 8, 1, 2, 3, 4, 7, 8));
        expect_shape(&t, "concat axis 0", y0, S(4, 2));
    }
    end(&t);
}

static void test_broadcast(void)
{
    tcase t;
    begin(&t, "broadcast");
    ir_value r = in(&t, NC_F32, S(3), V(1, 2, 3));
    ir_value col = in(&t, NC_F32, S(2, 1), V(1, 2));
    ir_value mid = in(&t, NC_I32, S(2, 1, 2), V(1, 2, 3, 4));
    ir_value b1 = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(2, 3), A(r));
    ir_value b2 = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(2, 3), A(col));
    ir_value b3 = op_shaped(&t, OP_BROADCAST, NC_I32, NOATTR, S(2, 2, 2), A(mid));
    ir_value b4 = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(2, 2, 3), A(col));
    if (run(&t)) {
        expect(&t, "[3] -> [2, 3]", b1, V(1, 2, 3, 1, 2, 3));
        expect(&t, "[2, 1] -> [2, 3]", b2, V(1, 1, 1, 2, 2, 2));
        expect(&t, "[2, 1, 2] -> [2, 2, 2]", b3, V(1, 2, 1, 2, 3, 4, 3, 4));
        expect(&t, "[2, 1] -> [2, 2, 3]", b4, V(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2));
    }
    end(&t);
}

static void test_gather_scatter(void)
{
    tcase t;
    begin(&t, "gather/scatter_add");
    ir_value tab = in(&t, NC_F32, S(4, 2), V(0, 1, 10, 11, 20, 21, 30, 31));
    ir_value idx = in(&t, NC_I32, S(2, 2), V(3, 0, 1, 3));
    ir_value ti = in(&t, NC_I32, S(3), V(5, 6, 7));
    ir_value si = in(&t, NC_I32, S(4), V(1, 0, 1, 1));
    ir_value src = in(&t, NC_F32, S(4, 2), V(1, 2, 3, 4, 5, 6, 7, 8));
    ir_value sb = in(&t, NC_I32, S(3), V(0, 0, 0));
    ir_value srcb = in(&t, NC_BF16, S(3), V(1, P8, P8));
    ir_value g = op(&t, OP_GATHER, NOATTR, A(tab, idx));
    ir_value gi = op(&t, OP_GATHER, NOATTR, A(ti, si));
    ir_value tf = in(&t, NC_F32, S(4, 1), V(0.5, 1.5, 2.5, 3.5));
    ir_value gf = op(&t, OP_GATHER, NOATTR, A(tf, idx));   /* rows of one element */
    ir_value sc = op(&t, OP_SCATTER_ADD, (ir_attr){.lo = ir_dim_const(t.g, 3)}, A(si, src));
    ir_value scb = op(&t, OP_SCATTER_ADD, (ir_attr){.lo = ir_dim_const(t.g, 2)}, A(sb, srcb));
    if (run(&t)) {
        expect(&t, "gather", g, V(30, 31, 0, 1, 10, 11, 30, 31));
        expect_shape(&t, "gather", g, S(2, 2, 2));
        expect(&t, "gather i32 rank 1", gi, V(6, 5, 6, 6));
        expect(&t, "gather f32 rows of 1", gf, V(3.5, 0.5, 1.5, 3.5));
        /* row 0 gets src[1]; row 1 gets src[0] + src[2] + src[3]; row 2 nothing */
        expect(&t, "scatter_add repeated", sc, V(3, 4, 13, 16, 0, 0));
        /* 1 + 2^-8 + 2^-8 = 1 + 2^-7, exact in bf16; a bf16 running sum would tie back to 1 twice */
        expect(&t, "scatter_add bf16 sums in double", scb, V(1 + 2 * P8, 0));
    }
    end(&t);

    /* Rows of 8, 16, 32 and 64 elements are copied by a copy of that size,
     * others by the general one: each row k of a table holds 1000 k + j. */
    for (int64_t rl = 7; rl <= 64; rl = rl == 7 ? 8 : 2 * rl) {
        begin(&t, "gather rows of 7 to 64");
        double tv[4 * 64], want[3 * 64];
        for (int64_t r = 0; r < 4; r++)
            for (int64_t j = 0; j < rl; j++) tv[r * rl + j] = 1000.0 * r + j;
        for (int64_t k = 0; k < 3; k++)
            for (int64_t j = 0; j < rl; j++) want[k * rl + j] = 1000.0 * (k == 1 ? 0 : 3 - k) + j;
        tab = in(&t, NC_F32, (const int64_t[]){4, rl}, 2, tv, (int)(4 * rl));
        idx = in(&t, NC_I32, S(3), V(3, 0, 1));
        g = op(&t, OP_GATHER, NOATTR, A(tab, idx));
        if (run(&t)) expect(&t, "gather", g, want, (int)(3 * rl));
        end(&t);
    }

    /* A row with one source is that source plus 0.0 (in double, the sum
     * from 0): -0 becomes +0. */
    begin(&t, "scatter_add one source");
    si = in(&t, NC_I32, S(2), V(2, 0));
    src = in(&t, NC_F32, S(2, 2), V(-0.0, 3, 4, -0.0));
    sc = op(&t, OP_SCATTER_ADD, (ir_attr){.lo = ir_dim_const(t.g, 3)}, A(si, src));
    if (run(&t)) {
        expect(&t, "scatter_add one source", sc, V(4, 0, 0, 0, 0, 3));
        const cpu_tensor *y = value(&t, sc);
        for (int j = 0; y && j < 6; j++)
            if (signbit(y->f[j])) fail(&t, "element %d is -0, expected +0", j);
    }
    end(&t);

    /* Each row's sum is in src's order: 1 + 2^60 - 2^60 is 0 in double, and
     * would be 1 summed the other way round. */
    begin(&t, "scatter_add order");
    si = in(&t, NC_I32, S(5), V(0, 2, 0, 2, 0));
    src = in(&t, NC_F32, S(5), V(1, 5, 1152921504606846976.0, 7, -1152921504606846976.0));
    sc = op(&t, OP_SCATTER_ADD, (ir_attr){.lo = ir_dim_const(t.g, 3)}, A(si, src));
    if (run(&t)) expect(&t, "scatter_add in order", sc, V(0, 0, 12));
    end(&t);

    begin(&t, "gather (index out of range)");
    tab = in(&t, NC_F32, S(50304, 1), NULL, 0);
    idx = in(&t, NC_I32, S(2), V(1, 70000));
    op(&t, OP_GATHER, NOATTR, A(tab, idx));
    run_expect_error(&t, "gather: index 70000 out of range [0, 50304)");
    end(&t);

    begin(&t, "gather (negative index)");
    tab = in(&t, NC_F32, S(4, 2), NULL, 0);
    idx = in(&t, NC_I32, S(1), V(-1));
    op(&t, OP_GATHER, NOATTR, A(tab, idx));
    run_expect_error(&t, "gather: index -1 out of range [0, 4)");
    end(&t);

    begin(&t, "scatter_add (index out of range)");
    si = in(&t, NC_I32, S(2), V(0, 3));
    src = in(&t, NC_F32, S(2), V(1, 2));
    op(&t, OP_SCATTER_ADD, (ir_attr){.lo = ir_dim_const(t.g, 3)}, A(si, src));
    run_expect_error(&t, "scatter_add: index 3 out of range [0, 3)");
    end(&t);
}

/* Bits of an f32 result against the value the general path defines: equal
 * bits, or both NaN. */
static void expect_array_bits(tcase *t, const char *what, const float *got, const float *want, int64_t n)
{
    int shown = 0;
    for (int64_t i = 0; i < n && shown < 5; i++)
        if (memcmp(&got[i], &want[i], sizeof *want) != 0 && !(isnan(got[i]) && isnan(want[i]))) {
            fail(t, "[%s] element %lld: expected %.9g, got %.9g", what, (long long)i, want[i], got[i]);
            shown++;
        }
}

static void expect_bits(tcase *t, const char *what, ir_value v, const float *want, int64_t n)
{
    const cpu_tensor *x = value(t, v);
    if (!x || !x->f || x->numel != n) {
        fail(t, "[%s] %%%u has no f32 value of %lld elements", what, v, (long long)n);
        return;
    }
    expect_array_bits(t, what, x->f, want, n);
}

/* Values with the cases rounding and NaN rules care about, repeated. */
static double awkward(int64_t i)
{
    static const double v[] = {1.5, -0.0, 0.0, -2.25, 3e38, -3e38, 1e-45, 0.1, 7.0, -1e-3, 12345.678};
    if (i % 97 == 13) return NAN;
    if (i % 89 == 7) return INFINITY;
    return v[i % (int64_t)NC_COUNT(v)] * (1.0 + (double)(i % 31) / 7.0);
}

/* f32 sqrt has its own loop: its bits are those of the double sqrt rounded
 * to f32 (negative, -0, NaN, inf and subnormal inputs included). */
static void test_sqrt_f32(void)
{
    enum { N = 301 };
    tcase t;
    begin(&t, "sqrt f32");
    double xv[N];
    float want[N];
    for (int i = 0; i < N; i++) xv[i] = awkward(i) * (i % 3 ? 1 : -1);
    ir_value x = in(&t, NC_F32, S(N), xv, N);
    ir_value y = op(&t, OP_SQRT, NOATTR, A(x));
    for (int i = 0; i < N; i++) want[i] = (float)sqrt((double)t.in[0].f[i]);
    if (run(&t)) expect_bits(&t, "sqrt", y, want, N);
    end(&t);
}

static uint32_t xorshift32(uint32_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}

/* + - * / of f32 (and bf16) operands compute in f32: the bits must be
 * those of the double operation rounded to f32 (then to the dtype), the
 * arithmetic cpu_exec.h defines, over values that round (sums of unlike
 * magnitudes, quotients), overflow, underflow to subnormals and carry NaNs,
 * infinities and -0, with either operand a splat. */
static void test_binary_f32_bits(void)
{
    enum { N = 4099 };
    static const nc_op ops[4] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV};
    static const char *names[4] = {"add", "sub", "mul", "div"};
    double *av = malloc(N * sizeof *av), *bv = malloc(N * sizeof *bv);
    float *want = malloc(N * sizeof *want);
    uint32_t seed = 12345;
    for (int i = 0; i < N; i++) {
        av[i] = awkward(i) * (i % 5 == 0 ? 1e-38 : 1.0);
        bv[i] = i % 7 == 3 ? -0.0 : awkward(i * 3 + 1) * (i % 4 == 0 ? 1e-7 : i % 4 == 1 ? 3e7 : 1.0);
        if (i % 11 == 5) {   /* random bits: any exponent, any mantissa */
            uint32_t ab = xorshift32(&seed), bb = xorshift32(&seed);
            float fa, fb;
            memcpy(&fa, &ab, 4), memcpy(&fb, &bb, 4);
            av[i] = fa, bv[i] = fb;
        }
    }
    for (int dt = 0; dt < 2; dt++)
        for (int splat = 0; splat < 3; splat++) {
            nc_dtype d = dt ? NC_BF16 : NC_F32;
            tcase t;
            begin(&t, dt ? "+ - * / of bf16: the bits of double rounded" : "+ - * / of f32: the bits of double rounded");
            ir_value a = in(&t, d, S(N), av, N), b = in(&t, d, S(N), bv, N);
            /* splat 1: a is 0.1 at every index, 2: b is -3e-39 (a subnormal in f32) */
            const double ka = 0.1, kb = -3e-39;
            ir_value fa = op_shaped(&t, OP_FILL, d, (ir_attr){.f = ka}, NULL, 0, NULL, 0);
            ir_value fb = op_shaped(&t, OP_FILL, d, (ir_attr){.f = kb}, NULL, 0, NULL, 0);
            ir_value x = splat == 1 ? op_shaped(&t, OP_BROADCAST, d, NOATTR, S(N), A(fa)) : a;
            ir_value y = splat == 2 ? op_shaped(&t, OP_BROADCAST, d, NOATTR, S(N), A(fb)) : b;
            ir_value r[4];
            for (int k = 0; k < 4; k++) ir_output_add(t.g, names[k], r[k] = op(&t, ops[k], NOATTR, A(x, y)));
            t.o.keep_all = false;
            if (!run(&t)) {
                end(&t);
                continue;
            }
            for (int k = 0; k < 4; k++) {
                for (int i = 0; i < N; i++) {
                    double p = splat == 1 ? nc_round_to(d, (float)ka) : t.in[0].f[i];
                    double q = splat == 2 ? nc_round_to(d, (float)kb) : t.in[1].f[i];
                    double e = k == 0 ? p + q : k == 1 ? p - q : k == 2 ? p * q : p / q;
                    want[i] = nc_round_to(d, (float)e);
                }
                expect_bits(&t, names[k], r[k], want, N);
            }
            end(&t);
        }
    free(av), free(bv), free(want);
}

/* Rows of 32 go in blocks of 4096 result rows: 10000 rows are three
 * blocks, the last one short. Each element is still src's running sum in
 * double in src order, from 0.0 (a row sent one -0 gives +0, one sent
 * none 0), whichever block its sources come from and in whatever order
 * they arrive: indices jump back and forth across the blocks. */
static void test_scatter_blocks(void)
{
    tcase t;
    ir_value si, src, sc;
    enum { ROWS = 10000, K = 30011, R = 32 };
    int32_t *iv = malloc(K * sizeof *iv);
    double *sv = malloc((size_t)K * R * sizeof *sv), *acc = calloc((size_t)ROWS * R, sizeof *acc);
    float *want = malloc((size_t)ROWS * R * sizeof *want);
    uint32_t seed = 99;
    for (int k = 0; k < K; k++) {
        uint32_t u = xorshift32(&seed);
        iv[k] = k % 5 == 0 ? (int32_t)(u % ROWS) : (int32_t)((k / 3 * 7 + (int32_t)(u % 3)) % ROWS);
        if (iv[k] == 17 || iv[k] == 18) iv[k] = 19;   /* 17 and 18 get one source each, below */
        for (int j = 0; j < R; j++) sv[(size_t)k * R + j] = j == 1 ? (k % 3 == 1 ? 1152921504606846976.0 : k % 3 == 2 ? -1152921504606846976.0 : 1.0) : awkward(k * R + j);
    }
    iv[0] = 17, iv[1] = 18;
    for (int j = 0; j < R; j++) sv[j] = -0.0;
    begin(&t, "scatter_add in blocks of rows");
    si = in(&t, NC_I32, S(K), NULL, 0);
    src = in(&t, NC_F32, S(K, R), sv, K * R);
    for (int k = 0; k < K; k++) t.in[0].i[k] = iv[k];
    sc = op(&t, OP_SCATTER_ADD, (ir_attr){.lo = ir_dim_const(t.g, ROWS)}, A(si, src));
    for (int k = 0; k < K; k++)
        for (int j = 0; j < R; j++) acc[(size_t)iv[k] * R + j] += t.in[1].f[(size_t)k * R + j];
    for (int64_t e = 0; e < (int64_t)ROWS * R; e++) want[e] = (float)acc[e];
    if (run(&t)) {
        expect_bits(&t, "scatter_add in blocks", sc, want, (int64_t)ROWS * R);
        if (signbit(value(&t, sc)->f[17 * R])) fail(&t, "row 17 (one source, -0): -0, expected +0");
    }
    end(&t);
    free(iv), free(sv), free(acc), free(want);
}

/* A float max over axes apart with the last one kept (a max_pool2d's
 * tiles, [B, OH, 2, OW, 2, C]) walks the input in order: its bits are
 * max_f's in that order (a tie of zeros goes to the later one, -inf and
 * infinities as they come), and a NaN anywhere takes the NaN rules. */
static float max_f_ref(float a, float b) { return isnan(a) ? a : isnan(b) ? b + 0.0f : a > b ? a : b; }

static void test_max_tiles(void)
{
    enum { A0 = 2, A1 = 3, A2 = 2, A3 = 2, C = 5, N = A0 * A1 * A2 * A3 * C, M = A0 * A2 * C };
    tcase t;
    begin(&t, "max over axes apart");
    double xv[N], nv[N];
    float want[M], wantn[M];
    for (int i = 0; i < N; i++) {
        nv[i] = awkward(i);
        xv[i] = i % 7 == 1 ? -0.0 : i % 7 == 4 ? 0.0 : i % 97 == 13 ? -INFINITY : -fabs(awkward(i));   /* zeros win */
    }
    ir_value x = in(&t, NC_F32, S(A0, A1, A2, A3, C), xv, N);
    ir_value xn = in(&t, NC_F32, S(A0, A1, A2, A3, C), nv, N);
    ir_value y = op(&t, OP_MAX, axes(2, 1, 3, false), A(x));
    ir_value yn = op(&t, OP_MAX, axes(2, 1, 3, false), A(xn));
    for (int k = 0; k < M; k++) want[k] = wantn[k] = -INFINITY;
    for (int i = 0; i < N; i++) {
        int c = i % C, a2 = i / (C * A3) % A2, a0 = i / (C * A3 * A2 * A1);
        int o = (a0 * A2 + a2) * C + c;
        want[o] = max_f_ref(want[o], t.in[0].f[i]);
        wantn[o] = max_f_ref(wantn[o], t.in[1].f[i]);
    }
    if (run(&t)) {
        expect_bits(&t, "max", y, want, M);
        expect_bits(&t, "max with NaNs", yn, wantn, M);
        for (int k = 0; k < M; k++)
            if (signbit(value(&t, yn)->f[k]) != signbit(wantn[k]))
                fail(&t, "max with NaNs: element %d's sign", k);
    }
    end(&t);
}

/* A float sum over axes apart with the trailing ones kept (a max pool's
 * gradient, [B, OH, 2, OW, 2, C] over axes 2 and 4) goes a result row at a
 * time; each element's additions are still in input order, in double (1,
 * 2^60, 1, -2^60, 1, 1 give 2 in that order, other sums in others), and -0
 * alone gives +0. */
static void test_sum_apart(void)
{
    enum { A0 = 2, A1 = 3, A2 = 2, A3 = 2, C = 5, N = A0 * A1 * A2 * A3 * C, M = A0 * A2 * C };
    tcase t;
    begin(&t, "sum over axes apart");
    double xv[N], acc[M] = {0};
    float want[M], wmean[M];
    for (int i = 0; i < N; i++) {
        int r = i / C % A3 + i / (C * A3 * A2) % A1 * A3;   /* the window position, 0..5, in input order */
        xv[i] = i % C == 0 ? -0.0 : i % C == 1 ? (r == 1 ? 1152921504606846976.0 : r == 3 ? -1152921504606846976.0 : 1.0)
                                  : awkward(i);
    }
    ir_value x = in(&t, NC_F32, S(A0, A1, A2, A3, C), xv, N);
    ir_value y = op(&t, OP_SUM, axes(2, 1, 3, false), A(x));
    ir_value m = op(&t, OP_MEAN, axes(2, 1, 3, false), A(x));
    for (int i = 0; i < N; i++) {
        int c = i % C, a2 = i / (C * A3) % A2, a0 = i / (C * A3 * A2 * A1);
        acc[(a0 * A2 + a2) * C + c] += t.in[0].f[i];
    }
    for (int k = 0; k < M; k++) want[k] = (float)acc[k], wmean[k] = (float)(acc[k] / (A1 * A3));
    if (run(&t)) {
        expect_bits(&t, "sum", y, want, M);
        expect_bits(&t, "mean", m, wmean, M);
        if (want[1] != 2.0f || signbit(want[0])) fail(&t, "test bug: want[1] = %g, want[0] = %g", want[1], want[0]);
    }
    end(&t);
}

/* A sum over trailing axes adds four rows at a time; each row's sum is
 * still in order from 0 (1 + 2^60 - 2^60 is 0, -0 alone gives +0), and the
 * rows past the last four go one by one. */
static void test_sum_rows(void)
{
    enum { R = 6, O = 7 };
    tcase t;
    begin(&t, "sum over trailing axes");
    double xv[O * R];
    float want[O], wmean[O];
    for (int o = 0; o < O; o++)
        for (int j = 0; j < R; j++) xv[o * R + j] = o == 2 ? -0.0 : j == 1 ? 1152921504606846976.0 : j == 3 ? -1152921504606846976.0 : awkward(o * R + j);
    ir_value x = in(&t, NC_F32, S(O, 2, 3), xv, O * R);
    ir_value s = op(&t, OP_SUM, axes(2, 1, 2, false), A(x));
    ir_value m = op(&t, OP_MEAN, axes(2, 1, 2, false), A(x));
    for (int o = 0; o < O; o++) {
        double a = 0;
        for (int j = 0; j < R; j++) a += t.in[0].f[o * R + j];
        want[o] = (float)a;
        wmean[o] = (float)(a / R);
    }
    if (run(&t)) {
        expect_bits(&t, "sum", s, want, O);
        expect_bits(&t, "mean", m, wmean, O);
    }
    end(&t);
}

/* Elementwise nodes of one large size run as a chain, tile by tile (the
 * last tile short), values read only inside the chain in scratch tiles. The
 * bits must be those of node-by-node runs: a * 2.5 + w, where(x > w, ., x),
 * / w, sqrt, - a. A reshape of c ends the first chain (a view of a pending
 * value) and the sum reads c's whole buffer. */
static void test_elementwise_chain(void)
{
    enum { N = 3 * 4096 + 5 };
    tcase t;
    begin(&t, "elementwise chain");
    double *xv = malloc(N * sizeof *xv), *wv = malloc(N * sizeof *wv);
    float *wa = malloc(N * sizeof *wa), *wc = malloc(N * sizeof *wc), *wf = malloc(N * sizeof *wf);
    for (int i = 0; i < N; i++) xv[i] = awkward(i), wv[i] = awkward(i + 5) + (i % 5 == 0 ? 0.0 : 0.5);
    ir_value x = in(&t, NC_F32, S(N), xv, N);
    ir_value w = in(&t, NC_F32, S(N), wv, N);
    ir_value s = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 2.5}, NULL, 0, NULL, 0);
    ir_value bs = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(N), A(s));
    ir_value a = op(&t, OP_MUL, NOATTR, A(x, bs));
    ir_value b = op(&t, OP_ADD, NOATTR, A(a, w));
    ir_value gt = op(&t, OP_GT, NOATTR, A(x, w));
    ir_value c = op(&t, OP_WHERE, NOATTR, A(gt, b, x));
    ir_value rc = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(1, N), A(c));
    ir_value sum = op(&t, OP_SUM, axes(1, 1, 0, false), A(rc));
    ir_value d = op(&t, OP_DIV, NOATTR, A(c, w));
    ir_value e = op(&t, OP_SQRT, NOATTR, A(d));
    ir_value f = op(&t, OP_SUB, NOATTR, A(e, a));
    ir_output_add(t.g, "f", f);
    ir_output_add(t.g, "sum", sum);
    t.o.keep_all = false;
    double acc = 0;
    for (int i = 0; i < N; i++) {
        double xi = t.in[0].f[i], wi = t.in[1].f[i];
        wa[i] = (float)(xi * 2.5);
        float bi = (float)((double)wa[i] + wi);
        wc[i] = xi > wi ? bi : (float)xi;
        acc += wc[i];
        float di = (float)((double)wc[i] / wi), ei = (float)sqrt((double)di);
        wf[i] = (float)((double)ei - wa[i]);
    }
    float wsum = (float)acc;
    if (run(&t)) {
        expect_bits(&t, "chain", f, wf, N);
        expect_bits(&t, "sum of a chained value", sum, &wsum, 1);
    }
    end(&t);

    /* k2, a constant the cache keeps (read by h), is written to its own
     * buffer though only the chain reads it: the second run reads it kept. */
    begin(&t, "elementwise chain of constants");
    x = in(&t, NC_F32, S(N), xv, N);
    ir_value io = op_shaped(&t, OP_IOTA, NC_I32, (ir_attr){.axis = 0}, S(N), NULL, 0);
    ir_value k = op_shaped(&t, OP_CAST, NC_F32, NOATTR, S(N), A(io));
    ir_value k2 = op(&t, OP_MUL, NOATTR, A(k, k));
    ir_value h = op(&t, OP_ADD, NOATTR, A(k2, x));
    ir_output_add(t.g, "h", h);
    t.o.keep_all = false;
    for (int i = 0; i < N; i++) wf[i] = (float)((double)(float)((double)i * i) + t.in[0].f[i]);
    if (run(&t)) {
        expect_bits(&t, "iota^2 + x", h, wf, N);
        if (t.pool.const_reads == 0) fail(&t, "the second run read no kept constant");
    }
    end(&t);
    free(xv), free(wv), free(wa), free(wc), free(wf);
}

/* An Adam-like chain of 1 MiB values: m2 = 0.9 m + 0.1 g and
 * p2 = p - lr m2 / (sqrt(g g) + eps), of which only m2 and p2 are read after
 * the chain. The seven values only the chain reads take a tile of scratch
 * and no buffer of their own (they took a 1 MiB buffer each, untouched:
 * 13 buffers and a 9.5 MiB peak, now 6 and 2.5 MiB). Every run gives the
 * bits of the op-by-op arithmetic, and so does one keeping every value
 * (keep_all: nothing local, every chained value stored). */
static void test_chain_local_storage(void)
{
    enum { N = 64 * 4096 };
    const float k09 = 0.9f, k01 = 0.1f, eps = 1e-8f, lr = 1e-3f;
    double *pv = malloc(N * sizeof *pv), *gv = malloc(N * sizeof *gv), *mv = malloc(N * sizeof *mv);
    float *wm = malloc(N * sizeof *wm), *wp = malloc(N * sizeof *wp);
    for (int i = 0; i < N; i++) pv[i] = awkward(i), gv[i] = awkward(i + 3) * 1e-3, mv[i] = awkward(i + 7) * 1e-2;
    for (int keep = 0; keep < 2; keep++) {
        tcase t;
        begin(&t, keep ? "chain-local values, all kept" : "chain-local values");
        ir_value p = in(&t, NC_F32, S(N), pv, N), g = in(&t, NC_F32, S(N), gv, N), m = in(&t, NC_F32, S(N), mv, N);
        ir_value k[4];
        const float kv[4] = {k09, k01, eps, lr};
        for (int j = 0; j < 4; j++) {
            ir_value f = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = kv[j]}, NULL, 0, NULL, 0);
            k[j] = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(N), A(f));
        }
        ir_value a = op(&t, OP_MUL, NOATTR, A(m, k[0])), b = op(&t, OP_MUL, NOATTR, A(g, k[1]));
        ir_value m2 = op(&t, OP_ADD, NOATTR, A(a, b));
        ir_value c = op(&t, OP_MUL, NOATTR, A(g, g)), e = op(&t, OP_SQRT, NOATTR, A(c));
        ir_value f = op(&t, OP_ADD, NOATTR, A(e, k[2])), h = op(&t, OP_DIV, NOATTR, A(m2, f));
        ir_value s = op(&t, OP_MUL, NOATTR, A(h, k[3])), p2 = op(&t, OP_SUB, NOATTR, A(p, s));
        ir_output_add(t.g, "m2", m2);
        ir_output_add(t.g, "p2", p2);
        t.o.keep_all = keep;
        for (int i = 0; i < N; i++) {
            double pi = t.in[0].f[i], gi = t.in[1].f[i], mi = t.in[2].f[i];
            wm[i] = (float)((double)(float)(mi * k09) + (double)(float)(gi * k01));
            float ei = (float)sqrt((double)(float)(gi * gi)), fi = (float)((double)ei + eps);
            float si = (float)((double)(float)((double)wm[i] / fi) * lr);
            wp[i] = (float)(pi - si);
        }
        if (run(&t)) {
            expect_bits(&t, "0.9 m + 0.1 g", m2, wm, N);
            expect_bits(&t, "p - lr m2 / (sqrt(g g) + eps)", p2, wp, N);
            /* the four fills and m2, p2; with keep_all the broadcasts (no views then) and
               the seven chained values too */
            uint64_t want = keep ? 17 : 6;
            if (t.pool.fresh != want)
                fail(&t, "%llu buffers, expected %llu", (unsigned long long)t.pool.fresh, (unsigned long long)want);
            /* and a 512 KiB tile of scratch for each thread the tiles are spread over */
            const int64_t mib = 1 << 20, peak = t.pool.peak_bytes, most = 5 * mib / 2 + cpu_crew_threads(NULL, 0) * mib / 2;
            if (!keep && peak >= most) fail(&t, "peak %lld bytes, expected under %lld", (long long)peak, (long long)most);
            if (keep && peak < 13 * mib) fail(&t, "peak %lld bytes, expected 13 MiB or more", (long long)peak);
        }
        end(&t);
    }
    free(pv), free(gv), free(mv), free(wm), free(wp);
}

/* A chain's tiles spread over NETC_CPU_THREADS threads: an Adam-like chain
 * (values local to the chain in each thread's own scratch, a short last
 * tile) gives the op-by-op bits on 1, 2, 3 and 16 threads, and a gathered
 * chain with two indices out of range, one in an early tile and one in a
 * late one, fails with the early one's message on any count (the first a
 * run in order meets). A count that is not a number from 1 to 16 fails the
 * run and says so. */
static void test_chain_threads(void)
{
    enum { N = 64 * 4096 + 5, M = 40 * 4096, V = 50 };
    const float k09 = 0.9f, eps = 1e-8f;
    double *pv = malloc(N * sizeof *pv), *gv = malloc(N * sizeof *gv), *iv = malloc(M * sizeof *iv);
    float *wm = malloc(N * sizeof *wm), *wp = malloc(N * sizeof *wp);
    double tv[V];
    for (int i = 0; i < N; i++) pv[i] = awkward(i), gv[i] = awkward(i + 3) * 1e-3;
    for (int i = 0; i < M; i++) iv[i] = (i * 7) % V;
    for (int i = 0; i < V; i++) tv[i] = i;
    iv[3 * 4096 + 17] = V, iv[35 * 4096 + 2] = V + 7;
    const char *saved = getenv("NETC_CPU_THREADS");
    char *old = saved ? strdup(saved) : NULL;
    static const char *counts[] = {"1", "2", "3", "16"};
    for (int c = 0; c < (int)NC_COUNT(counts); c++) {
        setenv("NETC_CPU_THREADS", counts[c], 1);
        tcase t;
        begin(&t, "chain on threads");
        ir_value p = in(&t, NC_F32, S(N), pv, N), g = in(&t, NC_F32, S(N), gv, N);
        ir_value f9 = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = k09}, NULL, 0, NULL, 0);
        ir_value fe = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = eps}, NULL, 0, NULL, 0);
        ir_value b9 = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(N), A(f9));
        ir_value be = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(N), A(fe));
        ir_value a = op(&t, OP_MUL, NOATTR, A(p, b9)), m2 = op(&t, OP_ADD, NOATTR, A(a, g));
        ir_value q = op(&t, OP_MUL, NOATTR, A(g, g)), e = op(&t, OP_SQRT, NOATTR, A(q));
        ir_value f = op(&t, OP_ADD, NOATTR, A(e, be)), h = op(&t, OP_DIV, NOATTR, A(m2, f));
        ir_value p2 = op(&t, OP_SUB, NOATTR, A(p, h));
        ir_output_add(t.g, "m2", m2);
        ir_output_add(t.g, "p2", p2);
        t.o.keep_all = false;
        for (int i = 0; i < N; i++) {
            double pi = t.in[0].f[i], gi = t.in[1].f[i];
            wm[i] = (float)((double)(float)(pi * k09) + gi);
            float ei = (float)sqrt((double)(float)(gi * gi)), fi = (float)((double)ei + eps);
            wp[i] = (float)(pi - (double)(float)((double)wm[i] / fi));
        }
        if (run(&t)) {
            expect_bits(&t, counts[c], m2, wm, N);
            expect_bits(&t, counts[c], p2, wp, N);
        }
        end(&t);

        begin(&t, "gathered chain on threads, two indices out of range");
        ir_value tab = in(&t, NC_F32, S(V, 1), tv, V), idx = in(&t, NC_I32, S(M), iv, M);
        ir_value gr = op(&t, OP_GATHER, NOATTR, A(tab, idx));
        ir_output_add(t.g, "y", op(&t, OP_NEG, NOATTR, A(gr)));
        t.o.keep_all = false;
        run_expect_error(&t, "gather: index 50 out of range [0, 50)");
        end(&t);
    }
    static const char *bad[] = {"0", "17", "2x", "-1"};
    for (int c = 0; c < (int)NC_COUNT(bad); c++) {
        setenv("NETC_CPU_THREADS", bad[c], 1);
        char want[128];
        snprintf(want, sizeof want, "NETC_CPU_THREADS=%s: expected a whole number from 1 to 16", bad[c]);
        tcase t;
        begin(&t, "a bad NETC_CPU_THREADS");
        ir_value x = in(&t, NC_F32, S(4), V(1, 2, 3, 4));
        ir_output_add(t.g, "y", op(&t, OP_NEG, NOATTR, A(x)));
        run_expect_error(&t, want);
        end(&t);
    }
    if (old) setenv("NETC_CPU_THREADS", old, 1);
    else unsetenv("NETC_CPU_THREADS");
    free(old), free(pv), free(gv), free(iv), free(wm), free(wp);
}
/* NETC_CPU_THREADS for one test, and back. */
static char *threads_set(const char *count)
{
    const char *saved = getenv("NETC_CPU_THREADS");
    char *old = saved ? strdup(saved) : NULL;
    setenv("NETC_CPU_THREADS", count, 1);
    return old;
}

static void threads_restore(char *old)
{
    if (old) setenv("NETC_CPU_THREADS", old, 1);
    else unsetenv("NETC_CPU_THREADS");
    free(old);
}

/* Attention, its lse and its three gradients of one shape, as graph nodes
 * out[0..4]; lens: key lengths over [B] (NULL: every key). */
typedef struct attn_shape {
    int64_t B, H, T, S, D, E;
    bool causal;
    const double *lens;
    const char *what;
} attn_shape;

static void attn_graph(tcase *t, const attn_shape *a, ir_value *out)
{
    int64_t nq = a->B * a->H * a->T * a->D, nk = a->B * a->H * a->S * a->D, nv = a->B * a->H * a->S * a->E;
    int64_t ng = a->B * a->H * a->T * a->E, nd = a->B * a->H * a->T, n = 16 + nq + nk + nv + ng;
    double *x = calloc((size_t)n, sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = sin(0.37 * (double)i + 0.1) * 1.7;
    ir_value q = in(t, NC_F32, S(a->B, a->H, a->T, a->D), x, (int)nq);
    for (int64_t i = 0; i < n; i++) x[i] = cos(1.31 * (double)i);
    ir_value k = in(t, NC_F32, S(a->B, a->H, a->S, a->D), x, (int)nk);
    ir_value v = in(t, NC_F32, S(a->B, a->H, a->S, a->E), x + 5, (int)nv);
    ir_value g = in(t, NC_F32, S(a->B, a->H, a->T, a->E), x + 11, (int)ng);
    ir_value delta = in(t, NC_F32, S(a->B, a->H, a->T, 1), x + 3, (int)nd);
    ir_value len = a->lens ? in(t, NC_I32, S(a->B), a->lens, (int)a->B) : 0;
    ir_attr at = {.causal = a->causal};
    out[0] = a->lens ? op(t, OP_ATTENTION, at, A(q, k, v, len)) : op(t, OP_ATTENTION, at, A(q, k, v));
    out[1] = a->lens ? op(t, OP_ATTENTION_LSE, at, A(q, k, len)) : op(t, OP_ATTENTION_LSE, at, A(q, k));
    for (int wrt = 0; wrt < 3; wrt++) {
        at.axis = wrt;
        out[2 + wrt] = a->lens ? op(t, OP_ATTENTION_GRAD, at, A(q, k, v, g, out[1], delta, len))
                               : op(t, OP_ATTENTION_GRAD, at, A(q, k, v, g, out[1], delta));
    }
    free(x);
}

/* The attention kernels share a head a tile over NETC_CPU_THREADS threads,
 * or with fewer heads than threads blocks of a head's rows (query rows; dk's
 * and dv's key rows after a pass over the query rows): on 2, 3 and 5
 * threads, odd shapes, causal or not, with key lengths (one of them 0, one
 * past S) give the one thread's bits, and the kernels did share their work
 * out (the load average pretended idle, as on a busy machine the gate would
 * run them alone). T = 301 = 25 x 12 + 1: a last block ends in one row
 * past the BLAS's 12-row kernels. */
static void test_attention_threads(void)
{
    static const double lens[3] = {50, 0, 90}, lens_long[3] = {250, 0, 900};
    static const attn_shape shapes[] = {
        {3, 5, 67, 71, 37, 29, false, NULL, "odd shapes"},
        {3, 5, 73, 73, 37, 29, true, NULL, "causal"},
        {3, 5, 67, 71, 37, 29, false, lens, "key lengths"},
        {1, 9, 64, 64, 64, 64, true, NULL, "gpt2's head size, one batch entry"},
        {1, 1, 301, 301, 64, 64, true, NULL, "one head of 64, causal"},
        {1, 1, 301, 307, 64, 64, false, NULL, "one head of 64"},
        {1, 1, 611, 613, 16, 16, false, NULL, "one head of 16"},
        {1, 1, 613, 613, 16, 16, true, NULL, "one head of 16, causal"},
        {3, 1, 301, 307, 64, 48, false, lens_long, "three heads, key lengths"},
        {3, 5, 71, 71, 37, 29, true, lens, "causal, key lengths"},
        {2, 3, 97, 97, 64, 48, true, NULL, "causal, odd heads"},
        {1, 3, 301, 301, 64, 64, true, lens_long, "causal, three heads, a key length"},
        {1, 1, 613, 613, 64, 40, true, NULL, "one head of 64, causal, T past a K block"},
    };
    /* the first: one thread over whole rows of scores, masked (the causal
       skip off), the reference of every other, the skip on */
    static const char *counts[] = {"1", "1", "2", "3", "5"};
    cpu_split_pretend(0, CPU_BLAS_REAL);
    bool can = cpu_gemm_split_rows() > 0;   /* a BLAS that may run on several threads */
    for (int s = 0; s < (int)NC_COUNT(shapes); s++) {
        const attn_shape *a = &shapes[s];
        float *one[5] = {0};
        int64_t n[5] = {0};
        for (int c = 0; c < (int)NC_COUNT(counts); c++) {
            char *old = threads_set(counts[c]);
            tcase t;
            char name[96];
            snprintf(name, sizeof name, "attention on %s threads, %s%s", counts[c], a->what,
                     c == 0 ? ", whole rows" : "");
            begin(&t, name);
            ir_value out[5];
            attn_graph(&t, a, out);
            int64_t shared = cpu_split_shared(), skipped = cpu_attention_skipped();
            cpu_attention_skip_pretend(c == 0);
            bool ran = run(&t);
            cpu_attention_skip_pretend(false);
            if (c == 0 && cpu_attention_skipped() != skipped) fail(&t, "the causal skip ran with it off");
            if (c > 0 && a->causal && can && cpu_attention_skipped() == skipped)
                fail(&t, "causal attention computed whole rows: the skip did not run");
            if (ran) {
                int64_t want = strcmp(counts[c], "1") && can ? 2 * 5 : 0;   /* run() runs the graph twice */
                if (cpu_split_shared() - shared != want)
                    fail(&t, "%lld of 2 x 5 kernels shared their work out, not %lld",
                         (long long)(cpu_split_shared() - shared), (long long)want);
                for (int i = 0; i < 5; i++) {
                    const cpu_tensor *x = value(&t, out[i]);
                    if (c == 0) {
                        n[i] = x->numel;
                        one[i] = malloc((size_t)n[i] * sizeof *one[i]);
                        memcpy(one[i], x->f, (size_t)n[i] * sizeof *one[i]);
                    } else {
                        static const char *what[] = {"out", "lse", "dq", "dk", "dv"};
                        expect_bits(&t, what[i], out[i], one[i], n[i]);
                    }
                }
            }
            end(&t);
            threads_restore(old);
        }
        for (int i = 0; i < 5; i++) free(one[i]);
    }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
}

/* The gates of a kernel's split (cpu_split_crew), through the executor on
 * two threads: a matmul and an attention worth the threads share their work
 * out at a 1-minute load average under 2 (the threads), and run alone at 2
 * or more, on a serial OpenBLAS (not safe from two threads) or a BLAS with
 * threads of its own. */
static void test_split_gates(void)
{
    typedef struct gate {
        double load;
        cpu_blas_kind blas;
        bool shares;
    } gate;
    static const gate gates[] = {
        {0, CPU_BLAS_REAL, true},       {1.9, CPU_BLAS_REAL, true},    {2, CPU_BLAS_REAL, false},
        {7.5, CPU_BLAS_REAL, false},    {0, CPU_BLAS_SERIAL, false},   {0, CPU_BLAS_THREADED, false},
        {0, CPU_BLAS_ONE_THREAD, true},
    };
    static const attn_shape a = {3, 5, 67, 71, 37, 29, false, NULL, "attention"};
    cpu_split_pretend(-1, CPU_BLAS_REAL);
    bool can = cpu_gemm_split_rows() > 0;
    char *old = threads_set("2");
    for (int i = 0; i < (int)NC_COUNT(gates); i++) {
        const gate *gt = &gates[i];
        if (gt->blas == CPU_BLAS_ONE_THREAD && !can) continue;   /* would call a serial BLAS from two threads */
        cpu_split_pretend(gt->load, gt->blas);
        tcase t;
        char name[96];
        snprintf(name, sizeof name, "split gates, load %g, blas kind %d", gt->load, (int)gt->blas);
        begin(&t, name);
        enum { M = 96, K = 300, N = 200 };   /* 5.8M multiply-adds, 8 blocks of 12 rows */
        double *x = malloc(K * N * sizeof *x);   /* both operands' values: K * N is the larger */
        for (int j = 0; j < K * N; j++) x[j] = sin(0.1 * j);
        ir_value ma = in(&t, NC_F32, S(M, K), x, M * K), mb = in(&t, NC_F32, S(K, N), x, K * N);
        free(x);
        op(&t, OP_MATMUL, NOATTR, A(ma, mb));
        ir_value out[5];
        attn_graph(&t, &a, out);
        int64_t shared = cpu_split_shared(), want = gt->shares && can ? 2 * 6 : 0;   /* run() runs it twice */
        if (run(&t) && cpu_split_shared() - shared != want)
            fail(&t, "%lld of 2 x 6 kernels shared their work out, not %lld", (long long)(cpu_split_shared() - shared),
                 (long long)want);
        end(&t);
    }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
    threads_restore(old);
}

/* The scores an attention kernel holds as scratch (a head's T x S floats,
 * + 1, a thread's; dk's two, P and dS) count in the pool's peak, beside the
 * result: on one thread, and on two sharing the heads (a buffer each). */
static void test_attention_scratch(void)
{
    typedef struct scratch_case {
        const char *threads;
        int64_t B, H;
        bool grad;                 /* dk, from P and dS, rather than the output */
        int64_t buffers;           /* of NT x NS + 1 floats */
    } scratch_case;
    static const scratch_case cases[] = {
        {"1", 1, 1, false, 1}, {"1", 1, 1, true, 2}, {"2", 3, 5, false, 2}, {"2", 3, 5, true, 4},
    };
    enum { NT = 67, NS = 71, ND = 37, NE = 29 };
    cpu_split_pretend(0, CPU_BLAS_REAL);
    bool can = cpu_gemm_split_rows() > 0;
    for (int i = 0; i < (int)NC_COUNT(cases); i++) {
        const scratch_case *sc = &cases[i];
        if (strcmp(sc->threads, "1") && !can) continue;   /* the heads would run on one thread */
        char *old = threads_set(sc->threads);
        tcase t;
        char name[96];
        snprintf(name, sizeof name, "attention scratch in the pool's peak, NETC_CPU_THREADS=%s, %s", sc->threads,
                 sc->grad ? "dk" : "output");
        begin(&t, name);
        t.o.keep_all = false;
        int64_t bh = sc->B * sc->H;
        ir_value q = in(&t, NC_F32, S(sc->B, sc->H, NT, ND), NULL, 0), k = in(&t, NC_F32, S(sc->B, sc->H, NS, ND), NULL, 0);
        ir_value v = in(&t, NC_F32, S(sc->B, sc->H, NS, NE), NULL, 0), out;
        if (sc->grad) {
            ir_value g = in(&t, NC_F32, S(sc->B, sc->H, NT, NE), NULL, 0);
            ir_value lse = in(&t, NC_F32, S(sc->B, sc->H, NT, 1), NULL, 0);
            ir_value delta = in(&t, NC_F32, S(sc->B, sc->H, NT, 1), NULL, 0);
            out = op(&t, OP_ATTENTION_GRAD, (ir_attr){.axis = 1}, A(q, k, v, g, lse, delta));
        } else {
            out = op(&t, OP_ATTENTION, NOATTR, A(q, k, v));
        }
        ir_output_add(t.g, "r", out);
        if (run(&t)) {
            int64_t result = bh * (sc->grad ? NS * ND : NT * NE) * CPU_ELEM_BYTES;
            int64_t want = result + sc->buffers * (NT * NS + 1) * (int64_t)sizeof(float);
            if (t.pool.peak_bytes != want)
                fail(&t, "the pool's peak is %lld bytes, want %lld (the result's %lld and %lld buffers of scores)",
                     (long long)t.pool.peak_bytes, (long long)want, (long long)result, (long long)sc->buffers);
        }
        end(&t);
        threads_restore(old);
    }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
}

/* cpu_exec_planned_bytes, from the graph alone, is what a run's pool holds
 * at most where no chain runs and no constant is kept: results of one size
 * take the buffers finished ones gave back, so three hold storage (a, read
 * again at the end, beside b and b + x, then c * c in b's), the reshape
 * none. netc train sizes its CPU evaluation by it. */
static void test_planned_bytes(void)
{
    tcase t;
    begin(&t, "planned bytes: the pool's peak");
    t.o.keep_all = false;
    ir_value x = in(&t, NC_F32, S(100), NULL, 0);
    ir_value a = op(&t, OP_EXP, NOATTR, A(x)), b = op(&t, OP_MUL, NOATTR, A(a, a));
    ir_value c = op(&t, OP_ADD, NOATTR, A(b, x)), d = op(&t, OP_MUL, NOATTR, A(c, c));
    ir_value f = op(&t, OP_ADD, NOATTR, A(d, a));
    ir_output_add(t.g, "r", op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(10, 10), A(f)));
    if (run(&t)) {
        int64_t planned = cpu_exec_planned_bytes(t.g, t.syms);
        if (planned != t.pool.peak_bytes || planned != 3 * 100 * CPU_ELEM_BYTES)
            fail(&t, "planned %lld bytes, the pool held %lld, want %d", (long long)planned, (long long)t.pool.peak_bytes,
                 3 * 100 * CPU_ELEM_BYTES);
    }
    end(&t);
}

/* A gather joins the chain of the elementwise ops after it (a padded
 * window's where, a relu), making each tile from its operands read whole:
 * rows of 3 (tiles cut rows) and of 16 (whole rows), the bits of the
 * op-by-op arithmetic, and the gathered rows in a tile of scratch, never a
 * buffer of their own (the peak: the result and the scratch, under twice
 * the result; with a buffer 2 results and more). An index out of range in
 * the last tile fails the run as the whole gather's would. */
static void test_gather_chain(void)
{
    enum { M = 32 * 4096 + 7, V = 50 };
    int32_t *ix = malloc(M * sizeof *ix);
    double *iv = malloc(M * sizeof *iv), *tv = malloc(V * 16 * sizeof *tv), *mv = malloc(M * 16 * sizeof *mv);
    float *want = malloc(M * 16 * sizeof *want);
    for (int k = 0; k < M; k++) ix[k] = (int32_t)((k * 37 + k / 5) % V), iv[k] = ix[k];
    for (int i = 0; i < V * 16; i++) tv[i] = awkward(i);
    for (int i = 0; i < M * 16; i++) mv[i] = (i / 3 + i / 7) % 4 != 0;
    for (int row = 3; row <= 16; row += 13) {
        tcase t;
        begin(&t, row == 3 ? "gather chain, rows of 3" : "gather chain, rows of 16");
        int64_t n = (int64_t)M * row;
        ir_value tab = in(&t, NC_F32, (const int64_t[]){V, row}, 2, tv, V * row);
        ir_value idx = in(&t, NC_I32, S(M), iv, M);
        ir_value mask = in(&t, NC_BOOL, (const int64_t[]){M, row}, 2, mv, (int)n);
        ir_value z = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = -0.5}, NULL, 0, NULL, 0);
        ir_value zb = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, (const int64_t[]){M, row}, 2, A(z));
        ir_value g = op(&t, OP_GATHER, NOATTR, A(tab, idx));   /* after the fill: a scalar node ends a chain */
        ir_value w = op(&t, OP_WHERE, NOATTR, A(mask, g, zb));
        ir_value y = op(&t, OP_RELU, NOATTR, A(w));
        ir_output_add(t.g, "y", y);
        t.o.keep_all = false;
        for (int64_t e = 0; e < n; e++) {
            float v = mv[e] != 0 ? (float)t.in[0].f[ix[e / row] * row + e % row] : -0.5f;
            want[e] = v > 0 || isnan(v) ? v : 0.0f;   /* relu keeps a NaN */
        }
        if (run(&t)) {
            expect_bits(&t, "relu(where(mask, gather, -0.5))", y, want, n);
            int64_t peak = t.pool.peak_bytes, bytes = n * 4;
            if (peak >= 2 * bytes)
                fail(&t, "peak %lld bytes, expected under %lld (the gathered rows in a buffer?)", (long long)peak,
                     (long long)(2 * bytes));
        }
        end(&t);
    }
    tcase t;
    begin(&t, "gather chain (index out of range)");
    iv[M - 2] = V;
    ir_value tab = in(&t, NC_F32, (const int64_t[]){V, 3}, 2, tv, V * 3);
    ir_value idx = in(&t, NC_I32, S(M), iv, M);
    ir_value g = op(&t, OP_GATHER, NOATTR, A(tab, idx));
    ir_output_add(t.g, "y", op(&t, OP_NEG, NOATTR, A(g)));
    t.o.keep_all = false;
    run_expect_error(&t, "gather: index 50 out of range [0, 50)");
    end(&t);
    free(ix), free(iv), free(tv), free(mv), free(want);
}

/* A broadcast over the last axis that only where's condition reads is a
 * view of the narrow mask (cpu_tensor.repeat), never written widened: the
 * two wheres (x where the mask holds or -1.5, and the other way round, a
 * chain) give the op-by-op bits, and the peak is their two results (with
 * the widened mask in a buffer of its own, three). A last axis of 3, which
 * does not divide a chain's tile, is widened a tile at a time in the
 * wheres' chain (makes_tiles). */
static void test_where_repeat(void)
{
    enum { M = 16 * 4096 + 3 };
    double *cv = malloc(M * sizeof *cv), *xv = malloc(M * 16 * sizeof *xv);
    float *w1 = malloc(M * 16 * sizeof *w1), *w2 = malloc(M * 16 * sizeof *w2);
    for (int k = 0; k < M; k++) cv[k] = (k / 3 + k / 11) % 3 != 0;
    for (int i = 0; i < M * 16; i++) xv[i] = awkward(i);
    for (int c = 3; c <= 16; c += 13) {
        tcase t;
        begin(&t, c == 3 ? "where over a mask widened to 3" : "where over a mask widened to 16 (a view)");
        int64_t n = (int64_t)M * c;
        ir_value cond = in(&t, NC_BOOL, S(M, 1), cv, M);
        ir_value x = in(&t, NC_F32, (const int64_t[]){M, c}, 2, xv, (int)n);
        ir_value f = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = -1.5}, NULL, 0, NULL, 0);
        ir_value fb = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, (const int64_t[]){M, c}, 2, A(f));
        ir_value cb = op_shaped(&t, OP_BROADCAST, NC_BOOL, NOATTR, (const int64_t[]){M, c}, 2, A(cond));
        ir_value y1 = op(&t, OP_WHERE, NOATTR, A(cb, x, fb)), y2 = op(&t, OP_WHERE, NOATTR, A(cb, fb, x));
        ir_output_add(t.g, "y1", y1);
        ir_output_add(t.g, "y2", y2);
        t.o.keep_all = false;
        for (int64_t e = 0; e < n; e++) {
            w1[e] = cv[e / c] != 0 ? t.in[1].f[e] : -1.5f;
            w2[e] = cv[e / c] != 0 ? -1.5f : t.in[1].f[e];
        }
        if (run(&t)) {
            expect_bits(&t, "where(mask, x, -1.5)", y1, w1, n);
            expect_bits(&t, "where(mask, -1.5, x)", y2, w2, n);
            int64_t peak = t.pool.peak_bytes, bytes = n * 4, most = c == 16 ? 2 * bytes + bytes / 2 : 4 * bytes;
            if (peak >= most) fail(&t, "peak %lld bytes, expected under %lld", (long long)peak, (long long)most);
        }
        end(&t);
    }
    free(cv), free(xv), free(w1), free(w2);
}

/* max's gradient over a pool's windows, [B, OH, 2, OW, 2, C] over axes 2
 * and 4, as autodiff builds it: hit = x == the max widened to the windows,
 * each window's count of hits, and where(hit, g / count widened, 0). The
 * widened max and share are chained tiles (makes_tiles), never buffers of
 * the windows' size: the peak is two such (hit, and its f32 count's input
 * or the gradient) and the pooled values (a quarter each) and a chain's
 * scratch, where each widened one held a third (B = 128: 2.6 buffers
 * against 3.5). Ties (-0 with 0 too) split the gradient; the bits are
 * those of the op-by-op arithmetic. The zeros come before the widened
 * share, as autodiff builds them: a node between the share's widening and
 * its where would end their chain. */
static void test_max_pool_grad(void)
{
    enum { B = 128, OH = 8, OW = 8, C = 32, N = B * OH * 2 * OW * 2 * C, M = B * OH * OW * C };
    double *xv = malloc(N * sizeof *xv), *gv = malloc(M * sizeof *gv);
    float *m = malloc(M * sizeof *m), *cnt = malloc(M * sizeof *cnt), *want = malloc(N * sizeof *want);
    for (int i = 0; i < N; i++) xv[i] = i % 11 == 3 ? -0.0 : (double)((i * 7 + i / 97) % 5 - 2);
    for (int k = 0; k < M; k++) gv[k] = awkward(k) == awkward(k) ? awkward(k) : 0.5;
    tcase t;
    begin(&t, "max pool's gradient (widened max and share chained)");
    const int64_t xs[6] = {B, OH, 2, OW, 2, C}, ws[6] = {B, OH, 1, OW, 1, C};
    ir_value x = in(&t, NC_F32, xs, 6, xv, N), g = in(&t, NC_F32, S(B, OH, OW, C), gv, M);
    ir_value mx = op(&t, OP_MAX, axes(2, 2, 4, false), A(x));
    ir_value mb = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, xs, 6,
                            A(op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, ws, 6, A(mx))));
    ir_value hit = op(&t, OP_EQ, NOATTR, A(x, mb));
    ir_value count = op(&t, OP_SUM, axes(2, 2, 4, false), A(op(&t, OP_CAST, (ir_attr){.to = NC_F32}, A(hit))));
    ir_value share = op(&t, OP_DIV, NOATTR, A(g, count));
    ir_value z = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, xs, 6,
                           A(op_shaped(&t, OP_FILL, NC_F32, NOATTR, NULL, 0, NULL, 0)));
    ir_value sb = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, xs, 6,
                            A(op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, ws, 6, A(share))));
    ir_value y = op(&t, OP_WHERE, NOATTR, A(hit, sb, z));
    ir_output_add(t.g, "dx", y);
    t.o.keep_all = false;
    for (int k = 0; k < M; k++) m[k] = -INFINITY, cnt[k] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++) {
            int c = i % C, ow = i / (2 * C) % OW, oh = i / (2 * C * OW * 2) % OH, b = i / (2 * C * OW * 2 * OH);
            int o = ((b * OH + oh) * OW + ow) * C + c;
            if (pass == 0) m[o] = max_f_ref(m[o], t.in[0].f[i]);
            else cnt[o] += t.in[0].f[i] == m[o];
        }
    for (int i = 0; i < N; i++) {
        int c = i % C, ow = i / (2 * C) % OW, oh = i / (2 * C * OW * 2) % OH, b = i / (2 * C * OW * 2 * OH);
        int o = ((b * OH + oh) * OW + ow) * C + c;
        want[i] = t.in[0].f[i] == m[o] ? t.in[1].f[o] / cnt[o] : 0.0f;
    }
    if (run(&t)) {
        expect_bits(&t, "dx", y, want, N);
        int64_t peak = t.pool.peak_bytes, bytes = (int64_t)N * 4;
        if (peak >= 3 * bytes)
            fail(&t, "peak %lld bytes, expected under %lld (a widened copy kept)", (long long)peak, (long long)(3 * bytes));
    }
    end(&t);
    free(xv), free(gv), free(m), free(cnt), free(want);
}

/* ------------------------------------------------------------------ */
/* the executor                                                         */

static void test_input_mismatch(void)
{
    tcase t;
    begin(&t, "input shape mismatch");
    int B = ir_sym_add(t.g, "B");
    dim_expr bs = dim_sym(B);
    uint32_t dims[3] = {ir_dim_intern(t.g, &bs), ir_dim_const(t.g, 28), ir_dim_const(t.g, 28)};
    ir_value x = declare(&t, NC_U8, 3, dims);
    op(&t, OP_CAST, (ir_attr){.to = NC_F32}, A(x));
    t.syms[B] = 64;
    fill_tensor(&t, &t.in[0], NC_U8, S(64, 784), NULL, 0);
    run_expect_error(&t, "input x0: expected u8[64, 28, 28], got u8[64, 784]");
    cpu_tensor_free(&t.in[0]);
    fill_tensor(&t, &t.in[0], NC_I32, S(64, 28, 28), NULL, 0);
    run_expect_error(&t, "input x0: expected u8[64, 28, 28], got i32[64, 28, 28]");
    cpu_tensor_free(&t.in[0]);
    fill_tensor(&t, &t.in[0], NC_U8, S(64, 28, 28), NULL, 0);
    if (run(&t)) expect_shape(&t, "input accepted", x, S(64, 28, 28));
    t.syms[B] = -1;
    run_expect_error(&t, "B = -1");
    end(&t);
}

static void test_absurd_sizes(void)
{
    tcase t;
    begin(&t, "absurd sizes");
    int N = ir_sym_add(t.g, "N");
    dim_expr ns = dim_sym(N);
    ir_node f = {.op = OP_FILL, .dtype = NC_F32, .rank = 1, .attr.f = 1};
    f.shape[0] = ir_dim_intern(t.g, &ns);
    build(&t, f, NULL, 0);
    t.syms[N] = 1000000000000;   /* 1e12 floats = 4 TB */
    run_expect_error(&t, "over the limit");
    t.syms[N] = 4;
    if (!run(&t)) fail(&t, "a small binding of the same graph failed");
    t.o.max_bytes = 8;           /* 4 floats are 16 bytes */
    run_expect_error(&t, "over the limit of 8 bytes");
    end(&t);

    begin(&t, "absurd sizes (overflow)");
    N = ir_sym_add(t.g, "N");
    ns = dim_sym(N);
    f.rank = 3;
    f.shape[0] = f.shape[1] = f.shape[2] = ir_dim_intern(t.g, &ns);
    build(&t, f, NULL, 0);
    t.syms[N] = 3000000;         /* (3e6)^3 = 2.7e19 elements: more than int64 holds */
    run_expect_error(&t, "more elements than fit");
    end(&t);
}

/* Without keep_all, values die after their last use; outputs survive. */
static void test_freeing(void)
{
    tcase t;
    begin(&t, "freeing");
    ir_value x = in(&t, NC_F32, S(2), V(0, 1));
    ir_value e = op(&t, OP_EXP, NOATTR, A(x));
    ir_value n = op(&t, OP_NEG, NOATTR, A(e));
    ir_value p = op(&t, OP_MUL, NOATTR, A(e, e));   /* e dies here, read twice */
    ir_value s = op(&t, OP_ADD, NOATTR, A(n, p));
    ir_value dead = op(&t, OP_SQUARE, NOATTR, A(x));
    ir_value w = param(&t, NC_F32, S(2), V(3, 4));
    ir_output_add(t.g, "n", n);
    ir_output_add(t.g, "s", s);
    ir_output_add(t.g, "w", w);      /* a source that is an output is copied, not aliased */
    t.o.keep_all = false;
    if (run(&t)) {
        const cpu_tensor *wv = value(&t, w);
        if (!wv || wv->f == t.par[0].f || t.res.borrowed[w]) fail(&t, "an output aliases the caller's param");
        cpu_tensor_free(&t.par[0]);  /* the caller replaces its param: the output must survive */
        fill_tensor(&t, &t.par[0], NC_F32, S(2), V(5, 6));
        expect(&t, "param output", w, V(3, 4));
        if (value(&t, e) || value(&t, p) || value(&t, dead) || value(&t, x)) fail(&t, "a dead value was kept");
        expect_tol(&t, "output used later", n, TOL, V(-1, -2.718281828459045));
        /* -e^x + e^2x: x=0 -> 0, x=1 -> 7.38905610 - 2.71828183 */
        expect_tol(&t, "output", s, TOL, V(0, 4.670774270471605));
    }
    if (!t.in[0].f || t.in[0].f[1] != 1) fail(&t, "the caller's input was freed or changed");
    end(&t);
}

/* A training step's new parameter values become the parameters' storage
 * (no copy: fashion_mlp's step copied 22 MB), but a value that is also an
 * output is copied, so the output still reads as the run made it. */
static void test_apply_updates(void)
{
    tcase t;
    begin(&t, "apply updates");
    ir_value w = param(&t, NC_F32, S(3), V(1, 2, 3));
    ir_value u = op(&t, OP_NEG, NOATTR, A(w));
    ir_update_add(t.g, 0, u);
    t.o.keep_all = false;
    for (int step = 0; step < 2 && run(&t); step++) {
        const float *moved = t.res.values[u].f;
        cpu_exec_apply_updates(t.g, &t.res, t.par);
        if (t.par[0].f != moved) fail(&t, "step %d: the new value was copied, not moved", step);
        if (t.res.values[u].f || t.res.values[w].f) fail(&t, "step %d: the result still holds a moved or old buffer", step);
        double sign = step == 0 ? -1 : 1;
        for (int i = 0; i < 3; i++)
            if (t.par[0].f[i] != sign * (i + 1)) fail(&t, "step %d: w[%d] = %g", step, i, t.par[0].f[i]);
    }
    end(&t);

    begin(&t, "apply updates (an output)");
    w = param(&t, NC_F32, S(2), V(1, 2));
    u = op(&t, OP_NEG, NOATTR, A(w));
    ir_update_add(t.g, 0, u);
    ir_output_add(t.g, "u", u);
    if (run(&t)) {
        const float *kept = t.par[0].f;
        cpu_exec_apply_updates(t.g, &t.res, t.par);
        if (t.par[0].f != kept || t.par[0].f[1] != -2) fail(&t, "the parameter did not take the output's value by copy");
        expect(&t, "output after the update", u, V(-1, -2));
    }
    end(&t);
}

/* update_in_place: Adam-like updates of m and p in one chain, on 1 and 3
 * threads, are written over the caller's parameters (the update's value is
 * the parameter's buffer, and apply_updates leaves it) with the op-by-op
 * bits. Where the old p is read after its update (a chained mul after it,
 * a sum at the end), p's update takes a buffer of its own and those readers
 * see the old values; m's, read by nothing after, is still in place. */
static void test_update_in_place(void)
{
    enum { N = 16 * 4096 + 3 };
    double *pv = malloc(N * sizeof *pv), *gv = malloc(N * sizeof *gv), *mv = malloc(N * sizeof *mv);
    float *wm = malloc(N * sizeof *wm), *wp = malloc(N * sizeof *wp), *wz = malloc(N * sizeof *wz);
    for (int i = 0; i < N; i++) pv[i] = awkward(i), gv[i] = awkward(i + 3) * 1e-3, mv[i] = awkward(i + 7) * 1e-2;
    const char *saved = getenv("NETC_CPU_THREADS");
    char *old = saved ? strdup(saved) : NULL;
    for (int late = 0; late < 2; late++)
        for (int threads = 1; threads <= 3; threads += 2) {
            setenv("NETC_CPU_THREADS", threads == 1 ? "1" : "3", 1);
            tcase t;
            begin(&t, late ? "update in place, p read after its update" : "update in place");
            ir_value p = param(&t, NC_F32, S(N), pv, N), m = param(&t, NC_F32, S(N), mv, N);
            ir_value g = in(&t, NC_F32, S(N), gv, N);
            ir_value f9 = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 0.9}, NULL, 0, NULL, 0);
            ir_value b9 = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(N), A(f9));
            ir_value m2 = op(&t, OP_ADD, NOATTR, A(op(&t, OP_MUL, NOATTR, A(m, b9)), g));
            ir_value e = op(&t, OP_SQRT, NOATTR, A(op(&t, OP_MUL, NOATTR, A(g, g))));
            ir_value p2 = op(&t, OP_SUB, NOATTR, A(p, op(&t, OP_DIV, NOATTR, A(m2, e))));
            ir_value z = IR_NONE, sum = IR_NONE;
            if (late) {
                ir_output_add(t.g, "z", z = op(&t, OP_MUL, NOATTR, A(p, b9)));
                ir_value rp = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(1, N), A(p));
                ir_output_add(t.g, "sum", sum = op(&t, OP_SUM, axes(1, 1, 0, false), A(rp)));
            }
            ir_update_add(t.g, 0, p2);
            ir_update_add(t.g, 1, m2);
            double acc = 0;
            for (int i = 0; i < N; i++) {
                double pi = t.par[0].f[i], mi = t.par[1].f[i], gi = t.in[0].f[i];
                wm[i] = (float)((double)(float)(mi * 0.9f) + gi);
                wp[i] = (float)(pi - (double)(float)((double)wm[i] / (float)sqrt((double)(float)(gi * gi))));
                wz[i] = (float)(pi * 0.9f);
                acc += pi;
            }
            float wsum = (float)acc;
            t.o = (cpu_exec_opts){.inputs = t.in, .params = t.par, .pool = &t.pool, .update_in_place = true};
            if (cpu_exec_run(t.g, &t.o, &t.res, t.err, sizeof t.err)) {
                fail(&t, "run failed: %s", t.err);
                end(&t);
                continue;
            }
            if (t.res.values[m2].f != t.par[1].f) fail(&t, "%d threads: m's update is not in m's buffer", threads);
            if ((t.res.values[p2].f == t.par[0].f) == (late != 0))
                fail(&t, "%d threads: p's update %s in p's buffer", threads, late ? "is" : "is not");
            if (late) {
                expect_bits(&t, "the old p times 0.9", z, wz, N);
                expect_bits(&t, "the old p's sum", sum, &wsum, 1);
            }
            cpu_exec_apply_updates(t.g, &t.res, t.par);
            expect_array_bits(&t, "p", t.par[0].f, wp, N);
            expect_array_bits(&t, "m", t.par[1].f, wm, N);
            end(&t);
        }
    if (old) setenv("NETC_CPU_THREADS", old, 1);
    else unsetenv("NETC_CPU_THREADS");
    free(old), free(pv), free(gv), free(mv), free(wm), free(wp), free(wz);
}

/* A broadcast of one element that only elementwise ops of two or three
 * operands read is not written out: they read its element at every index
 * (a splat), in any operand, f32, i32 and bool. */
static void test_splat_operands(void)
{
    tcase t;
    begin(&t, "splat operands");
    ir_value x = in(&t, NC_F32, S(4), V(1, 2, 3, 4));
    ir_value xi = in(&t, NC_I32, S(4), V(1, 5, 3, -4));
    ir_value s = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 2.5}, NULL, 0, NULL, 0);
    ir_value si = op_shaped(&t, OP_FILL, NC_I32, (ir_attr){.f = 3}, S(1), NULL, 0);
    ir_value no = op_shaped(&t, OP_FILL, NC_BOOL, (ir_attr){.f = 0}, NULL, 0, NULL, 0);
    ir_value bs = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(4), A(s));
    ir_value bsi = op_shaped(&t, OP_BROADCAST, NC_I32, NOATTR, S(4), A(si));
    ir_value bno = op_shaped(&t, OP_BROADCAST, NC_BOOL, NOATTR, S(4), A(no));
    ir_value r[] = {
        op(&t, OP_ADD, NOATTR, A(x, bs)),        op(&t, OP_SUB, NOATTR, A(bs, x)),
        op(&t, OP_MUL, NOATTR, A(bs, bs)),       op(&t, OP_ADD, NOATTR, A(xi, bsi)),
        op(&t, OP_LT, NOATTR, A(bsi, xi)),       op(&t, OP_LT, NOATTR, A(x, bs)),
    };
    ir_value w[] = {
        op(&t, OP_WHERE, NOATTR, A(r[5], x, bs)),   op(&t, OP_WHERE, NOATTR, A(r[5], bs, x)),
        op(&t, OP_WHERE, NOATTR, A(bno, x, bs)),    op(&t, OP_WHERE, NOATTR, A(bno, bs, x)),
        op(&t, OP_WHERE, NOATTR, A(r[5], bs, bs)),  op(&t, OP_WHERE, NOATTR, A(r[4], bsi, xi)),
    };
    for (size_t k = 0; k < NC_COUNT(r); k++) ir_output_add(t.g, "r", r[k]);
    for (size_t k = 0; k < NC_COUNT(w); k++) ir_output_add(t.g, "w", w[k]);
    t.o.keep_all = false;
    if (run(&t)) {
        expect(&t, "x + s", r[0], V(3.5, 4.5, 5.5, 6.5));
        expect(&t, "s - x", r[1], V(1.5, 0.5, -0.5, -1.5));
        expect(&t, "s * s", r[2], V(6.25, 6.25, 6.25, 6.25));
        expect(&t, "i32 x + s", r[3], V(4, 8, 6, -1));
        expect(&t, "i32 s < x", r[4], V(0, 1, 0, 0));
        expect(&t, "x < s", r[5], V(1, 1, 0, 0));
        expect(&t, "where(c, x, s)", w[0], V(1, 2, 2.5, 2.5));
        expect(&t, "where(c, s, x)", w[1], V(2.5, 2.5, 3, 4));
        expect(&t, "where(false, x, s)", w[2], V(2.5, 2.5, 2.5, 2.5));
        expect(&t, "where(false, s, x)", w[3], V(1, 2, 3, 4));
        expect(&t, "where(c, s, s)", w[4], V(2.5, 2.5, 2.5, 2.5));
        expect(&t, "i32 where(c, s, x)", w[5], V(1, 3, 3, -4));
        /* the three fills and the twelve results; the broadcasts none */
        if (t.pool.fresh != 15) fail(&t, "%llu buffers, expected 15", (unsigned long long)t.pool.fresh);
    }
    end(&t);
}

/* A reshape, and a splat broadcast, view their operand's buffer; the buffer
 * lives until the view's last reader, through a chain of views, though
 * values of its size are made (from the pool) after the operand's last
 * direct reader. */
static void test_views_live(void)
{
    tcase t;
    begin(&t, "views live");
    ir_value x = in(&t, NC_F32, S(4), V(0, 1, 2, 3));
    ir_value x2 = in(&t, NC_F32, S(2, 2), V(10, 20, 30, 40));
    ir_value e = op(&t, OP_NEG, NOATTR, A(x));
    ir_value r = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(2, 2), A(e));
    ir_value r2 = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(4), A(r));
    ir_value s = op_shaped(&t, OP_FILL, NC_F32, (ir_attr){.f = 2}, NULL, 0, NULL, 0);
    ir_value b = op_shaped(&t, OP_BROADCAST, NC_F32, NOATTR, S(2, 2), A(s));
    ir_value n = op(&t, OP_NEG, NOATTR, A(x2));     /* e's size: would take e's buffer */
    ir_value m = op(&t, OP_SUM, NOATTR, A(x));      /* s's size: would take s's buffer */
    ir_value y = op(&t, OP_ADD, NOATTR, A(r, n));
    ir_value y2 = op(&t, OP_MUL, NOATTR, A(y, b));
    ir_value z = op(&t, OP_MUL, NOATTR, A(r2, x));
    ir_output_add(t.g, "y2", y2);
    ir_output_add(t.g, "z", z);
    ir_output_add(t.g, "m", m);
    t.o.keep_all = false;
    if (run(&t)) {
        expect(&t, "(-x + -x2) * 2", y2, V(-20, -42, -64, -86));
        expect(&t, "-x * x", z, V(0, -1, -4, -9));
        expect(&t, "sum", m, V(6));
        /* e, s, n, m, y (y2 and z take n's and y's); the reshapes and the broadcast none */
        if (t.pool.fresh != 5) fail(&t, "%llu buffers, expected 5", (unsigned long long)t.pool.fresh);
    }
    end(&t);

    /* a view of a parameter, and an update that is a reshape (kept: a copy) */
    begin(&t, "views of a parameter");
    ir_value w = param(&t, NC_F32, S(2, 2), V(1, 2, 3, 4));
    ir_value rw = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(4), A(w));
    ir_value nw = op(&t, OP_NEG, NOATTR, A(rw));
    ir_value u = op_shaped(&t, OP_RESHAPE, NC_F32, NOATTR, S(2, 2), A(nw));
    ir_update_add(t.g, 0, u);
    t.o.keep_all = false;
    for (int step = 0; step < 2 && run(&t); step++) {
        cpu_exec_apply_updates(t.g, &t.res, t.par);
        double sign = step == 0 ? -1 : 1;
        for (int i = 0; i < 4; i++)
            if (t.par[0].f[i] != sign * (i + 1)) fail(&t, "step %d: w[%d] = %g", step, i, t.par[0].f[i]);
    }
    end(&t);
}

/* dim_value: a size read from the bound symbols, N * M here, for several
 * bindings (a constant kept in the pool, computed again at a new one): f32
 * rounds to nearest past 2^24 (4097 * 4097 is odd), i32 is exact, and an
 * i32 past 2^31 - 1 is an error, not a wrapped count. */
static void test_dim_value(void)
{
    tcase t;
    begin(&t, "dim_value");
    int N = ir_sym_add(t.g, "N"), M = ir_sym_add(t.g, "M");
    dim_expr nm;
    dim_expr ns = dim_sym(N), ms = dim_sym(M);
    if (dim_mul(&ns, &ms, &nm) != DIM_OK) { fail(&t, "test bug: N * M"); end(&t); return; }
    ir_node p = {.op = OP_DIM_VALUE, .dtype = NC_F32, .attr.lo = ir_dim_intern(t.g, &nm)};
    ir_value f = build(&t, p, NULL, 0);
    p.dtype = NC_I32;
    ir_value i = build(&t, p, NULL, 0);
    p.attr.lo = ir_dim_intern(t.g, &ns);
    ir_value n = build(&t, p, NULL, 0);
    ir_output_add(t.g, "f", f);
    ir_output_add(t.g, "i", i);
    ir_output_add(t.g, "n", n);
    t.o.keep_all = false;
    const int64_t bind[][2] = {{1, 1}, {3, 5}, {4097, 4097}, {46341, 46340}};
    for (size_t k = 0; k < NC_COUNT(bind); k++) {
        t.syms[N] = bind[k][0], t.syms[M] = bind[k][1];
        if (!run(&t)) break;
        int64_t v = bind[k][0] * bind[k][1];
        expect(&t, "f32 N * M", f, (const double[]){(float)v}, 1);
        expect(&t, "i32 N * M", i, (const double[]){(double)v}, 1);
        expect(&t, "i32 N", n, (const double[]){(double)bind[k][0]}, 1);
    }
    t.syms[N] = 46341, t.syms[M] = 46341;   /* 2147488281 */
    run_expect_error(&t, "does not fit in i32");
    end(&t);
}

/* Values that depend on no input and no parameter are computed in the first
 * run at a binding and read from the pool after: here kf = (iota * 2) as f32,
 * kr, a view of it, and a broadcast of kr's row, materialized since it has
 * more than one element. Bound to another N, they are computed again, at the
 * new size. */
static void test_const_cache(void)
{
    tcase t;
    begin(&t, "constants kept from run to run");
    int N = ir_sym_add(t.g, "N");
    dim_expr ns = dim_sym(N);
    uint32_t n = ir_dim_intern(t.g, &ns), one = ir_dim_const(t.g, 1), two = ir_dim_const(t.g, 2);
    ir_value x = declare(&t, NC_F32, 1, &n);
    ir_value xr = declare(&t, NC_F32, 2, (const uint32_t[]){one, n});
    ir_value x2 = declare(&t, NC_F32, 2, (const uint32_t[]){two, n});
    ir_node io = {.op = OP_IOTA, .dtype = NC_I32, .rank = 1, .shape = {n}};
    ir_value k = build(&t, io, NULL, 0);
    ir_value c2 = op_shaped(&t, OP_FILL, NC_I32, (ir_attr){.f = 2}, NULL, 0, NULL, 0);
    ir_node bc = {.op = OP_BROADCAST, .dtype = NC_I32, .rank = 1, .shape = {n}};
    ir_value k2 = op(&t, OP_MUL, NOATTR, A(k, build(&t, bc, A(c2))));
    ir_value kf = op(&t, OP_CAST, (ir_attr){.to = NC_F32}, A(k2));
    ir_node rs = {.op = OP_RESHAPE, .dtype = NC_F32, .rank = 2, .shape = {one, n}};
    ir_value kr = build(&t, rs, A(kf));
    ir_node rows = {.op = OP_BROADCAST, .dtype = NC_F32, .rank = 2, .shape = {two, n}};
    ir_value y = op(&t, OP_ADD, NOATTR, A(x, kf));
    ir_value y2 = op(&t, OP_ADD, NOATTR, A(xr, kr));
    ir_value y3 = op(&t, OP_MUL, NOATTR, A(x2, build(&t, rows, A(kr))));
    ir_output_add(t.g, "y", y);
    ir_output_add(t.g, "y2", y2);
    ir_output_add(t.g, "y3", y3);
    t.o.keep_all = false;
    for (int64_t len = 3; len <= 5; len += 2) {
        t.syms[N] = len;
        for (int i = 0; i < 3; i++) cpu_tensor_free(&t.in[i]);
        fill_tensor(&t, &t.in[0], NC_F32, S(len), NULL, 0);
        fill_tensor(&t, &t.in[1], NC_F32, S(1, len), NULL, 0);
        fill_tensor(&t, &t.in[2], NC_F32, S(2, len), NULL, 0);
        for (int64_t i = 0; i < len; i++) t.in[0].f[i] = t.in[1].f[i] = t.in[2].f[i] = 100, t.in[2].f[len + i] = 200;
        uint64_t builds = t.pool.const_builds, reads = t.pool.const_reads;
        if (!run(&t)) break;
        double want[10], want3[10];
        for (int64_t i = 0; i < len; i++) {
            want[i] = 100 + 2 * i;
            want3[i] = 100.0 * 2 * i, want3[len + i] = 200.0 * 2 * i;
        }
        expect(&t, "x + iota * 2", y, want, (int)len);
        expect(&t, "xr + view", y2, want, (int)len);
        expect(&t, "x2 * rows", y3, want3, 2 * (int)len);
        /* run_raw ran twice: the first computed the constants, the second read
         * kf (y's operand, and the buffer behind y2's) and the broadcast */
        if (t.pool.const_builds != builds + 1)
            fail(&t, "N = %lld: %llu builds, expected 1", (long long)len, (unsigned long long)(t.pool.const_builds - builds));
        if (t.pool.const_reads != reads + 2)
            fail(&t, "N = %lld: %llu values read from the pool, expected 2", (long long)len,
                 (unsigned long long)(t.pool.const_reads - reads));
    }
    /* Released between runs (a training step's pool while the evaluation
     * runs), the pool holds nothing and keeps its peak; the next runs
     * allocate and compute the constants again, to the same values. */
    cpu_exec_result_free(&t.res);
    int64_t peak = t.pool.peak_bytes;
    uint64_t builds = t.pool.const_builds;
    cpu_pool_release(&t.pool);
    if (t.pool.n || t.pool.held_bytes || t.pool.peak_bytes != peak)
        fail(&t, "released: %u buffers, %lld bytes held, peak %lld (was %lld)", t.pool.n, (long long)t.pool.held_bytes,
             (long long)t.pool.peak_bytes, (long long)peak);
    if (run(&t)) {
        double want[5];
        for (int64_t i = 0; i < 5; i++) want[i] = 100 + 2 * i;
        expect(&t, "x + iota * 2, released", y, want, 5);
        if (t.pool.const_builds != builds + 1) fail(&t, "released: %llu builds, expected 1", (unsigned long long)(t.pool.const_builds - builds));
    }
    end(&t);

    /* Only the sum is kept, and the iota behind it skipped: a lower
     * max_bytes, which the iota is over, computes them again and fails. */
    begin(&t, "constants and max_bytes");
    x = in(&t, NC_F32, NULL, 0, V(1));
    k = op_shaped(&t, OP_IOTA, NC_F32, NOATTR, S(5), NULL, 0);
    ir_value total = op(&t, OP_SUM, NOATTR, A(k));
    ir_output_add(t.g, "y", op(&t, OP_ADD, NOATTR, A(x, total)));
    t.o.keep_all = false;
    if (run(&t) && t.pool.const_reads != 1) fail(&t, "%llu values read from the pool, expected 1", (unsigned long long)t.pool.const_reads);
    t.o.max_bytes = 8;   /* the iota's 5 floats are 20 bytes */
    run_expect_error(&t, "over the limit of 8 bytes");
    end(&t);

    /* An output made of constants is handed to the caller, so computed every
     * run (never a kept buffer the caller would own); what reads it is still
     * a constant (the compiler's ir_constant_values): (3 * iota + 1) * 2 is
     * one kept value, with the iota and the 3 behind the output, not each
     * fill on its way */
    begin(&t, "constants read after an output");
    x = in(&t, NC_I32, S(4), V(10, 20, 30, 40));
    k = op_shaped(&t, OP_IOTA, NC_I32, NOATTR, S(4), NULL, 0);
    ir_value k3 = op(&t, OP_MUL, NOATTR, A(k, op_shaped(&t, OP_FILL, NC_I32, (ir_attr){.f = 3}, S(4), NULL, 0)));
    ir_value k31 = op(&t, OP_ADD, NOATTR, A(k3, op_shaped(&t, OP_FILL, NC_I32, (ir_attr){.f = 1}, S(4), NULL, 0)));
    ir_value k62 = op(&t, OP_MUL, NOATTR, A(k31, op_shaped(&t, OP_FILL, NC_I32, (ir_attr){.f = 2}, S(4), NULL, 0)));
    y = op(&t, OP_ADD, NOATTR, A(x, k62));
    ir_output_add(t.g, "k3", k3);
    ir_output_add(t.g, "y", y);
    t.o.keep_all = false;
    if (run(&t)) {
        expect(&t, "3 * iota, an output", k3, V(0, 3, 6, 9));
        expect(&t, "x + (3 * iota + 1) * 2", y, V(12, 28, 44, 60));
        if (t.pool.const_reads != 3) fail(&t, "%llu values read from the pool, expected 3", (unsigned long long)t.pool.const_reads);
    }
    end(&t);

    /* keep_all wants every value: nothing is kept or skipped */
    begin(&t, "constants with keep_all");
    x = in(&t, NC_I32, S(3), V(1, 2, 3));
    k = op_shaped(&t, OP_IOTA, NC_I32, NOATTR, S(3), NULL, 0);
    ir_value s = op(&t, OP_NEG, NOATTR, A(k));
    y = op(&t, OP_ADD, NOATTR, A(x, s));
    if (run(&t)) {
        expect(&t, "-iota", s, V(0, -1, -2));
        expect(&t, "x - iota", y, V(1, 1, 1));
        if (t.pool.const_reads) fail(&t, "keep_all read %llu kept values", (unsigned long long)t.pool.const_reads);
    }
    end(&t);
}

/* The matmuls run on one BLAS thread unless the environment asks for more:
 * OpenBLAS splits a product differently on more threads, and the bits of a
 * training run then depended on the core count (fashion_mlp: test accuracy
 * 0.8328 on two threads, 0.8349 on one). */
static void test_blas_threads(void)
{
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("GOTO_NUM_THREADS") || getenv("OMP_NUM_THREADS")) return;
    int n = cpu_blas_threads();
    if (n != 1) {
        printf("FAIL blas threads: %d, not 1\n", n);
        failures++;
    }
}

static void check_coverage(void)
{
    for (int o = 0; o < OP_COUNT; o++)
        if (!tested[o]) {
            printf("FAIL coverage: op %s has no test\n", op_name((nc_op)o));
            failures++;
        }
}

/* A run's error names where the failing node came from; a source path too
 * long for the caller's err ends the text in "..." (it was cut silently,
 * mid-path, with nothing to say so). */
static void test_long_error_path(void)
{
    tcase t;
    begin(&t, "a long path in a run's error");
    char path[1001];
    memset(path, 'p', 1000), path[1000] = 0;
    ir_node f = {.op = OP_FILL, .dtype = NC_F32, .rank = 1, .attr.f = 1, .loc = {ir_file_add(t.g, path), 3, 5}};
    const_dims(&t, (const int64_t[]){4}, 1, f.shape);
    build(&t, f, NULL, 0);
    t.o.max_bytes = 8;   /* 4 floats are 16 bytes */
    run_expect_error(&t, "pppp");
    size_t n = strlen(t.err);
    if (n != sizeof t.err - 1 || strcmp(t.err + n - 3, "...") != 0) fail(&t, "a cut error does not end in \"...\": \"%s\"", t.err + n - 10);
    end(&t);
}

/* cpu_exec_planned_bytes counts an attention kernel's scratch (its scores,
 * taken from the run's pool): on one thread the plan is the pool's peak to
 * the byte; on two (the load's gate pretended open) at least the peak, the
 * plan taking the crew's buffers wherever a crew may run. The shapes: two
 * heads of 67 x 71 (all five kernels, causal and not), 3 heads on 2 threads
 * (their rows cut), and one head of 301 (dk's two passes). */
static void test_attention_planned(void)
{
    static const attn_shape shapes[] = {
        {1, 2, 71, 71, 37, 29, true, NULL, "two heads, causal"},
        {3, 1, 301, 307, 64, 48, false, NULL, "three heads"},
        {1, 1, 301, 301, 64, 64, true, NULL, "one head"},
    };
    static const char *counts[] = {"1", "2"};
    cpu_split_pretend(0, CPU_BLAS_REAL);
    bool can = cpu_gemm_split_rows() > 0;
    for (int s = 0; s < (int)NC_COUNT(shapes); s++)
        for (int c = 0; c < (int)NC_COUNT(counts); c++) {
            if (c > 0 && !can) continue;
            char *old = threads_set(counts[c]);
            tcase t;
            char name[128];
            snprintf(name, sizeof name, "planned bytes of attention, %s threads, %s", counts[c], shapes[s].what);
            begin(&t, name);
            t.o.keep_all = false;
            ir_value out[5];
            attn_graph(&t, &shapes[s], out);
            for (int i = 0; i < 5; i++) {
                char o[8];
                snprintf(o, sizeof o, "o%d", i);
                ir_output_add(t.g, o, out[i]);
            }
            if (run(&t)) {
                int64_t planned = cpu_exec_planned_bytes(t.g, t.syms), peak = t.pool.peak_bytes;
                if (c == 0 ? planned != peak : planned < peak)
                    fail(&t, "planned %lld bytes, the pool held %lld at most", (long long)planned, (long long)peak);
            }
            end(&t);
            threads_restore(old);
        }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
}

/* Three heads on two threads were a head a thread and the third on one:
 * now each head's rows in two blocks, three a thread; entries a multiple of
 * the threads, or many of them, stay whole; too few rows for two blocks of
 * the BLAS's al rows, whole too; fewer entries than threads, a block a
 * thread. (The bits on 2, 3 and 5 threads: test_attention_threads.) */
static void test_attention_balance(void)
{
    typedef struct balance {
        int64_t batch, T;
        int threads;
        int64_t blocks;
    } balance;
    static const balance cases[] = {
        {3, 301, 2, 2}, {5, 301, 3, 3}, {4, 301, 3, 3}, {3, 301, 4, 4}, {1, 301, 2, 2},
        {4, 301, 2, 1}, {2, 301, 2, 1}, {9, 301, 2, 1}, {3, 12, 2, 1},
    };
    cpu_split_pretend(0, CPU_BLAS_REAL);
    if (cpu_gemm_split_rows() <= 0 || cpu_gemm_split_rows() > 12) {   /* products are not split: no blocks */
        cpu_split_pretend(-1, CPU_BLAS_REAL);
        return;
    }
    for (int i = 0; i < (int)NC_COUNT(cases); i++) {
        const balance *b = &cases[i];
        tcase t;
        char name[96];
        snprintf(name, sizeof name, "attention of %lld entries of %lld rows on %d threads", (long long)b->batch,
                 (long long)b->T, b->threads);
        begin(&t, name);
        int64_t got = cpu_attention_blocks(b->batch, b->T, b->T, 128, b->threads);
        if (got != b->blocks) fail(&t, "each entry in %lld blocks, want %lld", (long long)got, (long long)b->blocks);
        end(&t);
    }
    cpu_split_pretend(-1, CPU_BLAS_REAL);
}

int main(void)
{
    test_fill_iota();
    test_attention_lengths();
    test_param();
    test_unary_numeric();
    test_unary_float();
    test_binary();
    test_div_pow_minmax();
    test_compare_where();
    test_cast();
    test_dropout();
    test_reductions();
    test_softmax();
    test_norms();
    test_cross_entropy();
    test_matmul();
    test_matmul_sizes();
    test_matmul_transposed_sizes();
    test_transpose_reshape();
    test_slice();
    test_concat();
    test_broadcast();
    test_gather_scatter();
    test_input_mismatch();
    test_absurd_sizes();
    test_freeing();
    test_apply_updates();
    test_update_in_place();
    test_splat_operands();
    test_sqrt_f32();
    test_binary_f32_bits();
    test_sum_rows();
    test_elementwise_chain();
    test_chain_local_storage();
    test_chain_threads();
    test_attention_threads();
    test_split_gates();
    test_attention_scratch();
    test_planned_bytes();
    test_gather_chain();
    test_where_repeat();
    test_max_pool_grad();
    test_views_live();
    test_const_cache();
    test_max_tiles();
    test_scatter_blocks();
    test_sum_apart();
    test_dim_value();
    test_blas_threads();
    test_long_error_path();
    test_attention_planned();
    test_attention_balance();
    check_coverage();
    if (failures) {
        printf("test_cpu_ops: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cpu_ops: ok\n");
    return 0;
}
