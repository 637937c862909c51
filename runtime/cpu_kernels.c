/* cpu_kernels.c - the reference semantics of every op, one kernel per row of
 * ops.def.
 *
 * Conventions (see cpu_exec.h): floats are f32 arrays holding values exact in
 * their dtype; each result is computed in double, rounded to f32, then (f16,
 * bf16) rounded to the storage dtype by round_out. Integer and bool tensors are
 * i32 arrays. Elementwise loops touch the f32 data directly, so f32 storage
 * pays no per-element dispatch; the narrow formats pay one extra pass. */
#include "cpu_kernels.h"

#include "cpu_crew.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if NETC_HAVE_CBLAS
#include <cblas.h>
#endif
#if NETC_HAVE_CBLAS && defined(OPENBLAS_VERSION)
#define CPU_OPENBLAS 1
#endif
#include <pthread.h>

/* Not in strict C11 <math.h>. */
#define CPU_SQRT1_2 0.70710678118654752440
#define CPU_SQRT_2_OVER_PI 0.79788456080286535588

cpu_kernel_fn *const cpu_kernels[OP_COUNT] = {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, ...) [e] = cpu,
#include "ops.def"
#undef X
};

void cpu_fail(const cpu_op_ctx *c, const char *fmt, ...)
{
    if (!c->err || c->errcap == 0 || c->err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errcap, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ */
/* helpers                                                              */

static bool is_float(const cpu_tensor *t) { return t->f != NULL; }

static char *bytes_of(const cpu_tensor *t) { return t->f ? (char *)t->f : (char *)t->i; }

/* Product of shape[from..to). Shapes were checked against overflow at allocation. */
static int64_t span(const cpu_tensor *t, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= t->shape[i];
    return n;
}

/* Narrow float storage: the f32 result is rounded once more, to f16 or bf16. */
static void round_out(cpu_tensor *t)
{
    if (t->dtype == NC_F32 || !t->f) return;
    for (int64_t i = 0; i < t->numel; i++) t->f[i] = nc_round_to(t->dtype, t->f[i]);
}

/* Integer arithmetic wraps to the storage width (documented in cpu_exec.h).
 * Written without a signed overflow or an out-of-range conversion. */
static int32_t wrap_int(nc_dtype t, int64_t v)
{
    uint64_t u = (uint64_t)v;
    if (t == NC_U8) return (int32_t)(u & 0xffu);
    if (t == NC_BOOL) return v != 0;
    uint32_t w = (uint32_t)u;
    return w <= INT32_MAX ? (int32_t)w : (int32_t)(w - 0x80000000u) - INT32_MAX - 1;
}

static void copy_elems(char *dst, int64_t di, const char *src, int64_t si, int64_t n)
{
    if (n > 0) memcpy(dst + di * CPU_ELEM_BYTES, src + si * CPU_ELEM_BYTES, (size_t)n * CPU_ELEM_BYTES);
}

/* Row-major strides of t. */
static void strides_of(const cpu_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->shape[i];
    }
}

/* Walks a shape in row-major order one last-axis run at a time, tracking the
 * offset into another tensor addressed by per-axis strides (0 = repeated).
 * Kernels write the inner loop themselves, so it stays a plain indexed loop. */
typedef struct cpu_walk {
    int rank;
    int64_t shape[NC_MAX_RANK], stride[NC_MAX_RANK], idx[NC_MAX_RANK];
    int64_t off;            /* other tensor's offset at the start of the current run */
    int64_t len, step;      /* run length (last axis) and the other tensor's stride along it */
    int64_t runs;           /* number of runs in the whole shape */
} cpu_walk;

static void walk_init(cpu_walk *w, int rank, const int64_t *shape, const int64_t *stride)
{
    memset(w, 0, sizeof *w);
    if (rank == 0) {        /* a scalar is one run of one element */
        w->rank = 1;
        w->shape[0] = 1;
    } else {
        w->rank = rank;
        memcpy(w->shape, shape, (size_t)rank * sizeof *shape);
        memcpy(w->stride, stride, (size_t)rank * sizeof *stride);
    }
    w->len = w->shape[w->rank - 1];
    w->step = w->stride[w->rank - 1];
    w->runs = 1;
    for (int i = 0; i < w->rank - 1; i++) w->runs *= w->shape[i];
    if (w->len == 0) w->runs = 0;
}

static void walk_next(cpu_walk *w)
{
    for (int a = w->rank - 2; a >= 0; a--) {
        w->off += w->stride[a];
        if (++w->idx[a] < w->shape[a]) return;
        w->off -= w->stride[a] * w->shape[a];
        w->idx[a] = 0;
    }
}

/* One last-axis run of gather_strided, in the storage's own type. */
#define GATHER_RUNS(T, SRC, DST)                                              \
    do {                                                                      \
        T *d_ = (DST);                                                        \
        for (int64_t r_ = 0; r_ < w.runs; r_++, walk_next(&w), d_ += w.len) { \
            const T *s_ = (SRC) + w.off;                                      \
            if (w.step == 1) {                                                \
                memcpy(d_, s_, (size_t)w.len * sizeof *d_);                   \
            } else if (w.step == 0) { /* broadcast along the last axis */     \
                T v_ = s_[0];                                                 \
                for (int64_t j_ = 0; j_ < w.len; j_++) d_[j_] = v_;           \
            } else {                                                          \
                for (int64_t j_ = 0; j_ < w.len; j_++) d_[j_] = s_[j_ * w.step]; \
            }                                                                 \
        }                                                                     \
    } while (0)

/* out[j] = in[offset of j], where the walk over out's shape gives the offset. */
static void gather_strided(const cpu_tensor *in, cpu_tensor *out, const int64_t *in_stride)
{
    cpu_walk w;
    walk_init(&w, out->rank, out->shape, in_stride);
    if (is_float(out)) GATHER_RUNS(float, in->f, out->f);
    else GATHER_RUNS(int32_t, in->i, out->i);
}

/* The walk at its run q: each axis but the last at q's digit. */
static void walk_seek(cpu_walk *w, int64_t q)
{
    for (int a = w->rank - 2; a >= 0; a--) {
        w->idx[a] = q % w->shape[a];
        w->off += w->idx[a] * w->stride[a];
        q /= w->shape[a];
    }
}

/* len elements of one run from element j of the run on. */
#define GATHER_PIECE(T, SRC, DST)                                                        \
    do {                                                                                 \
        T *d_ = (DST) + done;                                                            \
        const T *s_ = (SRC) + w.off + j * w.step;                                        \
        if (w.step == 1) memcpy(d_, s_, (size_t)len * sizeof *d_);                       \
        else for (int64_t k_ = 0; k_ < len; k_++) d_[k_] = s_[k_ * w.step];              \
    } while (0)

/* out = elements [first, first + out->numel) of gather_strided's result at
 * shape (a chain's tile, which may begin and end inside a run). */
static void gather_strided_part(const cpu_tensor *in, cpu_tensor *out, int rank, const int64_t *shape,
                                const int64_t *in_stride, int64_t first)
{
    cpu_walk w;
    walk_init(&w, rank, shape, in_stride);
    if (w.runs == 0 || out->numel == 0) return;
    walk_seek(&w, first / w.len);
    for (int64_t done = 0, j = first % w.len; done < out->numel; j = 0, walk_next(&w)) {
        int64_t len = w.len - j < out->numel - done ? w.len - j : out->numel - done;
        if (is_float(out)) GATHER_PIECE(float, in->f, out->f);
        else GATHER_PIECE(int32_t, in->i, out->i);
        done += len;
    }
}

static bool dim_value(const cpu_op_ctx *c, uint32_t dim, int64_t *v)
{
    return dim < c->g->ndims && dim_eval(&c->g->dims[dim], c->syms, v);
}

/* ------------------------------------------------------------------ */
/* sources (inputs and params are bound by cpu_exec_run)                */

void cpu_input(const cpu_op_ctx *c) { (void)c; }
void cpu_param(const cpu_op_ctx *c) { (void)c; }

void cpu_fill(const cpu_op_ctx *c)
{
    cpu_tensor *y = c->out;
    if (y->numel == 0) return;
    cpu_set(y, 0, c->node->attr.f);
    if (is_float(y)) {
        for (int64_t i = 1; i < y->numel; i++) y->f[i] = y->f[0];
    } else {
        for (int64_t i = 1; i < y->numel; i++) y->i[i] = y->i[0];
    }
}

/* The value itself, not a count of ones: O(1) whatever the size. */
void cpu_dim_value(const cpu_op_ctx *c)
{
    int64_t v;
    if (!dim_value(c, c->node->attr.lo, &v)) {
        cpu_fail(c, "dim_value: the size has no value at this binding");
        return;
    }
    if (!is_float(c->out) && v > INT32_MAX) {
        cpu_fail(c, "dim_value: %lld does not fit in i32", (long long)v);
        return;
    }
    cpu_set(c->out, 0, (double)v);
}

void cpu_iota(const cpu_op_ctx *c)
{
    cpu_tensor *y = c->out;
    int ax = c->node->attr.axis;
    if (ax < 0 || ax >= y->rank) {
        cpu_fail(c, "iota: axis %d out of range for rank %d", ax, y->rank);
        return;
    }
    /* One block of n * inner elements, each k stored (cpu_set's rounding or
     * saturation) once and repeated across its inner run; then block copies. */
    int64_t outer = span(y, 0, ax), n = y->shape[ax], inner = span(y, ax + 1, y->rank), block = n * inner;
    if (y->numel == 0) return;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = k * inner;
        cpu_set(y, i, (double)k);
        if (is_float(y)) {
            for (int64_t j = 1; j < inner; j++) y->f[i + j] = y->f[i];
        } else {
            for (int64_t j = 1; j < inner; j++) y->i[i + j] = y->i[i];
        }
    }
    for (int64_t o = 1; o < outer; o++) copy_elems(bytes_of(y), o * block, bytes_of(y), 0, block);
}

/* ------------------------------------------------------------------ */
/* elementwise: the loops, instantiated per expression                  */

/* Float map: EXPR of double x (and a, b) rounded to f32, then to the dtype. */
#define MAP1_F(EXPR)                                                   \
    do {                                                               \
        const float *xs_ = c->args[0]->f;                              \
        float *ys_ = c->out->f;                                        \
        for (int64_t i_ = 0, n_ = c->out->numel; i_ < n_; i_++) {      \
            double x = xs_[i_];                                        \
            ys_[i_] = (float)(EXPR);                                   \
        }                                                              \
        round_out(c->out);                                             \
    } while (0)

#define MAP1_I(EXPR)                                                   \
    do {                                                               \
        const int32_t *xs_ = c->args[0]->i;                            \
        int32_t *ys_ = c->out->i;                                      \
        nc_dtype t_ = c->out->dtype;                                   \
        for (int64_t i_ = 0, n_ = c->out->numel; i_ < n_; i_++) {      \
            int64_t x = xs_[i_];                                       \
            ys_[i_] = wrap_int(t_, (EXPR));                            \
        }                                                              \
    } while (0)

/* Two operands, either of which may be a splat (cpu_tensor.splat: its one
 * element read at every index, as the broadcast would have written it): one
 * plain loop per case, so each still vectorizes. T is what a and b are
 * computed in; STORE, of a and b, is what element i_ of ys_ gets. */
#define LOOP2(T, IA, IB, STORE)                                        \
    for (int64_t i_ = 0; i_ < n_; i_++) {                              \
        T a = as_[IA], b = bs_[IB];                                    \
        ys_[i_] = STORE;                                               \
    }
#define SPLAT2(T, STORE)                                               \
    do {                                                               \
        bool sa_ = c->args[0]->splat, sb_ = c->args[1]->splat;         \
        if (!sa_ && !sb_) LOOP2(T, i_, i_, STORE)                      \
        else if (!sb_) LOOP2(T, 0, i_, STORE)                          \
        else if (!sa_) LOOP2(T, i_, 0, STORE)                          \
        else LOOP2(T, 0, 0, STORE)                                     \
    } while (0)

#define MAP2_F(EXPR)                                                   \
    do {                                                               \
        const float *as_ = c->args[0]->f, *bs_ = c->args[1]->f;        \
        float *ys_ = c->out->f;                                        \
        int64_t n_ = c->out->numel;                                    \
        SPLAT2(double, (float)(EXPR));                                 \
        round_out(c->out);                                             \
    } while (0)

/* MAP2_F of + - * /, computed in f32: the f32 operation rounds once, and
 * the double one rounded to f32 gives the same bits (double has more than
 * 2 x 24 + 2 bits, so its own rounding cannot move the second; the IEEE
 * NaN and infinity rules agree), while the loop runs twice as wide and
 * converts nothing. The operands are exact in f32 whatever the dtype. */
#define MAP2_F32(EXPR)                                                 \
    do {                                                               \
        const float *as_ = c->args[0]->f, *bs_ = c->args[1]->f;        \
        float *ys_ = c->out->f;                                        \
        int64_t n_ = c->out->numel;                                    \
        SPLAT2(float, (EXPR));                                         \
        round_out(c->out);                                             \
    } while (0)

#define MAP2_I(EXPR)                                                   \
    do {                                                               \
        const int32_t *as_ = c->args[0]->i, *bs_ = c->args[1]->i;      \
        int32_t *ys_ = c->out->i;                                      \
        int64_t n_ = c->out->numel;                                    \
        nc_dtype t_ = c->out->dtype;                                   \
        SPLAT2(int64_t, wrap_int(t_, (EXPR)));                         \
    } while (0)

/* Comparisons read either storage and write bool 0/1. */
#define CMP(EXPR)                                                      \
    do {                                                               \
        int32_t *ys_ = c->out->i;                                      \
        int64_t n_ = c->out->numel;                                    \
        if (is_float(c->args[0])) {                                    \
            const float *as_ = c->args[0]->f, *bs_ = c->args[1]->f;    \
            SPLAT2(double, (EXPR));                                    \
        } else {                                                       \
            const int32_t *as_ = c->args[0]->i, *bs_ = c->args[1]->i;  \
            SPLAT2(int64_t, (EXPR));                                   \
        }                                                              \
    } while (0)

static double relu_d(double x) { return x > 0 || isnan(x) ? x : 0.0; }   /* NaN wins, as in maximum */
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
/* erfc, not 1 + erf: below x = -5 the sum keeps only the digits erf(x)
 * has past -1 (none below -8.3), erfc keeps them all. */
static double gelu_d(double x) { return 0.5 * x * erfc(-x * CPU_SQRT1_2); }
static double gelu_tanh_d(double x)
{
    return x / (1.0 + exp(-2.0 * CPU_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));   /* 0.5 x (1 + tanh u), without the cancellation */
}
static double max_d(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a > b ? a : b; }
/* max_d of floats, in float: the same comparisons; a NaN is quieted (+ 0)
 * as its conversion to double and back would. */
static float max_f(float a, float b) { return isnan(a) ? a : isnan(b) ? b + 0.0f : a > b ? a : b; }
static double min_d(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a < b ? a : b; }
static int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
/* Truncated division; x/0 = 0 and INT32_MIN/-1 wraps (computed in int64). */
static int64_t div_i(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }

void cpu_neg(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP1_F(-x);
    else MAP1_I(-x);
}

void cpu_abs(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP1_F(fabs(x));
    else MAP1_I(x < 0 ? -x : x);
}

void cpu_square(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP1_F(x * x);
    else MAP1_I(x * x);
}

void cpu_relu(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP1_F(relu_d(x));
    else MAP1_I(x > 0 ? x : 0);
}

void cpu_exp(const cpu_op_ctx *c) { MAP1_F(exp(x)); }
void cpu_log(const cpu_op_ctx *c) { MAP1_F(log(x)); }
/* The double square root of an f32, rounded to f32, is the f32 square root
 * (double has more than 2 x 24 + 2 bits), NaNs and -0 included: in f32 the
 * loop runs twice as wide. */
void cpu_sqrt(const cpu_op_ctx *c)
{
    if (c->out->dtype != NC_F32) {
        MAP1_F(sqrt(x));
        return;
    }
    const float *xs = c->args[0]->f;
    float *ys = c->out->f;
    for (int64_t i = 0, n = c->out->numel; i < n; i++) ys[i] = sqrtf(xs[i]);
}
void cpu_rsqrt(const cpu_op_ctx *c) { MAP1_F(1.0 / sqrt(x)); }
void cpu_tanh(const cpu_op_ctx *c) { MAP1_F(tanh(x)); }
void cpu_sin(const cpu_op_ctx *c) { MAP1_F(sin(x)); }
void cpu_cos(const cpu_op_ctx *c) { MAP1_F(cos(x)); }
void cpu_erf(const cpu_op_ctx *c) { MAP1_F(erf(x)); }
void cpu_sigmoid(const cpu_op_ctx *c) { MAP1_F(sigmoid_d(x)); }
void cpu_gelu(const cpu_op_ctx *c) { MAP1_F(gelu_d(x)); }
void cpu_gelu_tanh(const cpu_op_ctx *c) { MAP1_F(gelu_tanh_d(x)); }
void cpu_silu(const cpu_op_ctx *c) { MAP1_F(x * sigmoid_d(x)); }

static double gelu_tanh_slope(double x)
{
    double s = 1.0 / (1.0 + exp(-2.0 * CPU_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));   /* (1 + tanh u) / 2 */
    return s + 2.0 * x * s * (1.0 - s) * CPU_SQRT_2_OVER_PI * (1.0 + 0.134145 * x * x);
}
void cpu_gelu_tanh_grad(const cpu_op_ctx *c) { MAP2_F(b * gelu_tanh_slope(a)); }

/* Phi(x) + x phi(x), Phi as erfc (see gelu_d) */
static double gelu_slope(double x) { return 0.5 * erfc(-x * CPU_SQRT1_2) + x * 0.39894228040143268 * exp(-0.5 * x * x); }
void cpu_gelu_grad(const cpu_op_ctx *c) { MAP2_F(b * gelu_slope(a)); }

void cpu_add(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP2_F32(a + b);
    else MAP2_I(a + b);
}

void cpu_sub(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP2_F32(a - b);
    else MAP2_I(a - b);
}

void cpu_mul(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP2_F32(a * b);
    else MAP2_I(a * b);
}

void cpu_div(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP2_F32(a / b);
    else MAP2_I(div_i(a, b));
}

void cpu_pow(const cpu_op_ctx *c) { MAP2_F(pow(a, b)); }

void cpu_maximum(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP2_F(max_d(a, b));
    else MAP2_I(max_i(a, b));
}

void cpu_minimum(const cpu_op_ctx *c)
{
    if (is_float(c->out)) MAP2_F(min_d(a, b));
    else MAP2_I(min_i(a, b));
}

/* IEEE comparisons: anything against NaN is false, except !=. */
void cpu_eq(const cpu_op_ctx *c) { CMP(a == b); }
void cpu_ne(const cpu_op_ctx *c) { CMP(a != b); }
void cpu_lt(const cpu_op_ctx *c) { CMP(a < b); }
void cpu_le(const cpu_op_ctx *c) { CMP(a <= b); }
void cpu_gt(const cpu_op_ctx *c) { CMP(a > b); }
void cpu_ge(const cpu_op_ctx *c) { CMP(a >= b); }

/* An operand's step from one element to the next: 0 for a splat. */
static int64_t step_of(const cpu_tensor *t) { return t->splat ? 0 : 1; }

/* As SPLAT2: one plain loop for each case of a splat value operand; under
 * a splat condition every element comes from the one operand it picks
 * (rare: one loop that multiplies the index). */
#define WHERE_LOOP(T, IC, IA, IB)                                                 \
    do {                                                                          \
        for (int64_t i_ = 0; i_ < n; i_++) {                                      \
            T av_ = a_[IA], bv_ = b_[IB]; /* both loaded: the loop vectorizes */  \
            y_[i_] = cond[IC] ? av_ : bv_;                                        \
        }                                                                         \
    } while (0)
#define WHERE(T, A, B, Y)                                                         \
    do {                                                                          \
        const T *a_ = (A), *b_ = (B);                                             \
        T *y_ = (Y);                                                              \
        if (c->args[0]->splat) { /* the other operand may be a splat: not read */ \
            const T *p_ = cond[0] ? a_ : b_;                                      \
            int64_t sp_ = cond[0] ? sa : sb;                                      \
            for (int64_t i_ = 0; i_ < n; i_++) y_[i_] = p_[i_ * sp_];             \
        } else if (sa && sb) WHERE_LOOP(T, i_, i_, i_);                           \
        else if (sa) WHERE_LOOP(T, i_, i_, 0);                                    \
        else if (sb) WHERE_LOOP(T, i_, 0, i_);                                    \
        else WHERE_LOOP(T, i_, 0, 0);                                             \
    } while (0)

/* A condition that repeats each element rep times (cpu_tensor.repeat): one
 * read of it a run, the run copied from the operand it picks, one loop for
 * each case of a splat operand (IA, IB: the index into each). */
#define WHERE_RUNS(T, IA, IB)                                                     \
    for (int64_t g_ = 0; g_ < n / rep; g_++) {                                    \
        int64_t i0_ = g_ * rep;                                                   \
        if (cond[g_])                                                             \
            for (int64_t i_ = i0_; i_ < i0_ + rep; i_++) y_[i_] = a_[IA];         \
        else                                                                      \
            for (int64_t i_ = i0_; i_ < i0_ + rep; i_++) y_[i_] = b_[IB];         \
    }
#define WHERE_REPEAT(T, A, B, Y)                                                  \
    do {                                                                          \
        const T *a_ = (A), *b_ = (B);                                             \
        T *y_ = (Y);                                                              \
        if (sa && sb) WHERE_RUNS(T, i_, i_)                                       \
        else if (sa) WHERE_RUNS(T, i_, 0)                                         \
        else if (sb) WHERE_RUNS(T, 0, i_)                                         \
        else WHERE_RUNS(T, 0, 0)                                                  \
    } while (0)

void cpu_where(const cpu_op_ctx *c)
{
    const int32_t *cond = c->args[0]->i;
    int64_t n = c->out->numel, sa = step_of(c->args[1]), sb = step_of(c->args[2]), rep = c->args[0]->repeat;
    if (rep > 1 && n % rep != 0) {
        cpu_fail(c, "where: %lld elements are no whole runs of the condition's %lld", (long long)n, (long long)rep);
        return;
    }
    if (rep > 1) {
        if (is_float(c->out)) WHERE_REPEAT(float, c->args[1]->f, c->args[2]->f, c->out->f);
        else WHERE_REPEAT(int32_t, c->args[1]->i, c->args[2]->i, c->out->i);
        return;
    }
    if (is_float(c->out)) WHERE(float, c->args[1]->f, c->args[2]->f, c->out->f);
    else WHERE(int32_t, c->args[1]->i, c->args[2]->i, c->out->i);
}

/* Conversions saturate (cpu_set); only the common f32 -> f16/bf16/f32 and
 * integer -> float cases get their own loop. */
void cpu_cast(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->args[0];
    cpu_tensor *y = c->out;
    if (x->dtype == NC_F32 && y->dtype == NC_F32) {
        memcpy(y->f, x->f, (size_t)y->numel * sizeof *y->f);
        return;
    }
    if (x->dtype == NC_F32 && is_float(y)) {
        for (int64_t i = 0; i < y->numel; i++) y->f[i] = nc_round_to(y->dtype, x->f[i]);
        return;
    }
    if (!is_float(x) && y->dtype == NC_F32) {   /* an i32 is exact in double, rounded once to f32 */
        for (int64_t i = 0; i < y->numel; i++) y->f[i] = (float)x->i[i];
        return;
    }
    if (!is_float(x) && is_float(y)) {   /* cpu_set's rounding of cpu_get's value (images to f32) */
        for (int64_t i = 0; i < y->numel; i++) y->f[i] = nc_round_to(y->dtype, (float)(double)x->i[i]);
        return;
    }
    for (int64_t i = 0; i < y->numel; i++) cpu_set(y, i, cpu_get(x, i));
}

/* With its step operand (a graph built to train), element i is kept iff
 * its draw u(seed, step, i) >= p; kept ones are x * (1/(1-p)) computed in
 * double. The step is the i32 operand's bits as an unsigned number (the
 * stream), so the draw depends only on (seed, step, i) and every backend
 * drops the same elements. Without the operand (inference): the identity. */
void cpu_dropout(const cpu_op_ctx *c)
{
    const float *x = c->args[0]->f;
    float *y = c->out->f;
    int64_t n = c->out->numel;
    int slot = ir_step_slot(c->node);
    if (slot < 0) {
        memcpy(y, x, (size_t)n * sizeof *y);
        return;
    }
    double p = c->node->attr.f, scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    uint64_t seed = (uint64_t)c->node->attr.seed, step = (uint32_t)c->args[slot]->i[0];
    for (int64_t i = 0; i < n; i++)
        y[i] = (double)nc_rng_uniform(seed, step, (uint64_t)i) >= p ? (float)(x[i] * scale) : 0.0f;
    round_out(c->out);
}

/* ------------------------------------------------------------------ */
/* reductions over attr.axes                                            */

/* Per input axis, the output stride (0 on reduced axes): keepdim only
 * inserts size-1 axes, so the output layout is the same either way. */
static int64_t reduce_strides(const cpu_op_ctx *c, int64_t *ostride)
{
    const cpu_tensor *x = c->args[0];
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < c->node->attr.naxes; k++) {
        int ax = c->node->attr.axes[k];
        if (ax >= 0 && ax < x->rank) red[ax] = true;
    }
    int64_t s = 1, count = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        ostride[i] = red[i] ? 0 : s;
        if (red[i]) count *= x->shape[i];
        else s *= x->shape[i];
    }
    return count;   /* elements reduced into each output */
}

/* acc[out offset] = OP(acc, x) over the input in order. A run along a
 * reduced last axis accumulates in a local, the same operations in the
 * same order (the compiler cannot keep acc[o] in a register itself). */
#define REDUCE_WALK(T, XS, ACC, OP)                                   \
    do {                                                              \
        cpu_walk w_;                                                  \
        walk_init(&w_, c->args[0]->rank, c->args[0]->shape, ostride); \
        int64_t base_ = 0;                                            \
        for (int64_t r_ = 0; r_ < w_.runs; r_++, walk_next(&w_)) {    \
            if (w_.step == 0) {                                       \
                T a_ = (ACC)[w_.off];                                 \
                for (int64_t j_ = 0; j_ < w_.len; j_++) {             \
                    T v = (XS)[base_ + j_];                           \
                    a_ = OP(a_, v);                                   \
                }                                                     \
                (ACC)[w_.off] = a_;                                   \
            } else {                                                  \
                for (int64_t j_ = 0; j_ < w_.len; j_++) {             \
                    int64_t o_ = w_.off + j_ * w_.step;               \
                    T v = (XS)[base_ + j_];                           \
                    (ACC)[o_] = OP((ACC)[o_], v);                     \
                }                                                     \
            }                                                         \
            base_ += w_.len;                                          \
        }                                                             \
    } while (0)

#define ADD_OP(acc, v) ((acc) + (v))

/* y = acc / div, rounded once (div: the count for mean, else 1). */
static void reduce_finish(cpu_tensor *y, const double *acc, double div)
{
    if (is_float(y)) {
        for (int64_t i = 0; i < y->numel; i++) y->f[i] = (float)(acc[i] / div);
        round_out(y);
    } else {
        for (int64_t i = 0; i < y->numel; i++) cpu_set(y, i, acc[i]);
    }
}

/* The reduced axes as one block between kept ones: x is [outer, R, inner]
 * and y [outer, inner], inner > 1 (a pooling window's axis, or all but the
 * channels). False for any other set of axes. */
typedef struct reduce_block {
    int64_t outer, R, inner;
} reduce_block;

static bool block_of(const cpu_op_ctx *c, reduce_block *b)
{
    const cpu_tensor *x = c->args[0];
    bool red[NC_MAX_RANK] = {0};
    int lo = x->rank, hi = -1;
    for (int k = 0; k < c->node->attr.naxes; k++) {
        int ax = c->node->attr.axes[k];
        if (ax >= 0 && ax < x->rank) red[ax] = true;
    }
    for (int i = 0; i < x->rank; i++)
        if (red[i]) lo = i < lo ? i : lo, hi = i;
    for (int i = lo; i <= hi; i++)
        if (!red[i]) return false;
    if (hi < 0 || hi == x->rank - 1) return false;
    *b = (reduce_block){span(x, 0, lo), span(x, lo, hi + 1), span(x, hi + 1, x->rank)};
    return b->inner > 1 && b->R > 0;
}

/* A float sum over a block: for each output row, its R input rows added in
 * order into a row of doubles, as REDUCE_WALK adds them into the whole
 * result's (the same additions), so no result-sized buffer. */
static void sum_block(const cpu_op_ctx *c, const reduce_block *b, double div)
{
    const float *x = c->args[0]->f;
    float *y = c->out->f;
    double *acc = nc_xmalloc((size_t)b->inner * sizeof *acc);
    for (int64_t o = 0; o < b->outer; o++) {
        for (int64_t i = 0; i < b->inner; i++) acc[i] = 0;
        for (int64_t r = 0; r < b->R; r++) {
            const float *xr = x + (o * b->R + r) * b->inner;
            for (int64_t i = 0; i < b->inner; i++) acc[i] += xr[i];
        }
        for (int64_t i = 0; i < b->inner; i++) y[o * b->inner + i] = (float)(acc[i] / div);
    }
    free(acc);
    round_out(c->out);
}

/* The reduced axes are the last ones (and at least one is): x is
 * [outer, R] and y [outer]. */
static bool rows_of_suffix(const cpu_op_ctx *c, int64_t *outer, int64_t *R)
{
    const cpu_tensor *x = c->args[0];
    bool red[NC_MAX_RANK] = {0};
    int lo = x->rank;
    for (int k = 0; k < c->node->attr.naxes; k++) {
        int ax = c->node->attr.axes[k];
        if (ax >= 0 && ax < x->rank) red[ax] = true;
    }
    while (lo > 0 && red[lo - 1]) lo--;
    for (int i = 0; i < lo; i++)
        if (red[i]) return false;
    *outer = span(x, 0, lo);
    *R = span(x, lo, x->rank);
    return lo < x->rank;
}

/* A float sum over trailing axes, four rows at a time: each row's additions
 * in REDUCE_WALK's order (from 0, element by element), but four chains of
 * them interleaved, so the adds' latency overlaps. */
#define SUM_ROWS 4
static void sum_rows(const cpu_op_ctx *c, int64_t outer, int64_t R, double div)
{
    const float *x = c->args[0]->f;
    float *y = c->out->f;
    int64_t o = 0;
    for (; o + SUM_ROWS <= outer; o += SUM_ROWS) {
        const float *x0 = x + o * R, *x1 = x0 + R, *x2 = x1 + R, *x3 = x2 + R;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t j = 0; j < R; j++) a0 += x0[j], a1 += x1[j], a2 += x2[j], a3 += x3[j];
        y[o] = (float)(a0 / div), y[o + 1] = (float)(a1 / div), y[o + 2] = (float)(a2 / div), y[o + 3] = (float)(a3 / div);
    }
    for (; o < outer; o++) {
        double a = 0;
        for (int64_t j = 0; j < R; j++) a += x[o * R + j];
        y[o] = (float)(a / div);
    }
    round_out(c->out);
}

/* One step of an odometer over the axes ax[0..n) of a shape (the last
 * fastest), keeping *off, the offset by strides st, in step. */
static void odometer_next(int n, const int *ax, const int64_t *shape, const int64_t *st, int64_t *idx, int64_t *off)
{
    for (int a = n - 1; a >= 0; a--) {
        *off += st[ax[a]];
        if (++idx[a] < shape[ax[a]]) return;
        *off -= st[ax[a]] * shape[ax[a]];
        idx[a] = 0;
    }
}

/* A float sum over axes apart with the trailing ones kept (a max pool's
 * gradient counting each window's maxima: [B, OH, 2, OW, 2, C] over axes 2
 * and 4), a result row (the kept trailing axes) at a time: each element gets
 * its inputs added in input order, as REDUCE_WALK adds them, but into a row
 * of doubles, not a result-sized buffer allocated, zeroed and walked run by
 * run. False for other axes. */
static bool sum_apart(const cpu_op_ctx *c, double div)
{
    const cpu_tensor *x = c->args[0];
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < c->node->attr.naxes; k++) {
        int ax = c->node->attr.axes[k];
        if (ax >= 0 && ax < x->rank) red[ax] = true;
    }
    int t = x->rank, kept[NC_MAX_RANK], reduced[NC_MAX_RANK], nk = 0, nr = 0;
    while (t > 0 && !red[t - 1]) t--;
    if (t == x->rank) return false;   /* the last axis is reduced: sum_rows' or REDUCE_WALK's */
    const int64_t inner = span(x, t, x->rank);
    if (inner < 2) return false;
    int64_t st[NC_MAX_RANK], rows = 1, combos = 1;
    strides_of(x, st);
    for (int i = 0; i < t; i++) {
        if (red[i]) reduced[nr++] = i, combos *= x->shape[i];
        else kept[nk++] = i, rows *= x->shape[i];
    }
    double *acc = nc_xmalloc((size_t)inner * sizeof *acc);
    int64_t ki[NC_MAX_RANK] = {0}, row_off = 0;
    for (int64_t o = 0; o < rows; o++, odometer_next(nk, kept, x->shape, st, ki, &row_off)) {
        for (int64_t j = 0; j < inner; j++) acc[j] = 0;
        int64_t ri[NC_MAX_RANK] = {0}, off = row_off;
        for (int64_t q = 0; q < combos; q++, odometer_next(nr, reduced, x->shape, st, ri, &off)) {
            const float *xr = x->f + off;
            for (int64_t j = 0; j < inner; j++) acc[j] += xr[j];
        }
        for (int64_t j = 0; j < inner; j++) c->out->f[o * inner + j] = (float)(acc[j] / div);
    }
    free(acc);
    round_out(c->out);
    return true;
}

/* Sum in double for floats; ints are summed in int64 and wrap like add. */
static void reduce_sum(const cpu_op_ctx *c, bool mean)
{
    int64_t ostride[NC_MAX_RANK];
    int64_t count = reduce_strides(c, ostride), outer, R;
    cpu_tensor *y = c->out;
    reduce_block b;
    if (is_float(y) && block_of(c, &b)) {
        sum_block(c, &b, mean ? (double)count : 1.0);
        return;
    }
    if (is_float(y) && rows_of_suffix(c, &outer, &R) && outer >= SUM_ROWS) {
        sum_rows(c, outer, R, mean ? (double)count : 1.0);
        return;
    }
    if (is_float(y) && sum_apart(c, mean ? (double)count : 1.0)) return;
    if (!is_float(y)) {
        int64_t *acc = nc_xcalloc((size_t)y->numel, sizeof *acc);
        REDUCE_WALK(int64_t, c->args[0]->i, acc, ADD_OP);
        for (int64_t i = 0; i < y->numel; i++) y->i[i] = wrap_int(y->dtype, acc[i]);
        free(acc);
        return;
    }
    double *acc = nc_xcalloc((size_t)y->numel, sizeof *acc);
    REDUCE_WALK(double, c->args[0]->f, acc, ADD_OP);
    reduce_finish(y, acc, mean ? (double)count : 1.0);
    free(acc);
}

void cpu_sum(const cpu_op_ctx *c) { reduce_sum(c, false); }
void cpu_mean(const cpu_op_ctx *c) { reduce_sum(c, true); }

/* y[i] = max(y[i], x[i]) as a > b ? a : b, which vectorizes; whether x
 * held a NaN (the comparison then dropped it: the caller redoes the max). */
static int max_run(float *y, const float *x, int64_t n)
{
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = y[i], v = x[i];
        y[i] = a > v ? a : v;
        nan |= v != v;
    }
    return nan;
}

/* A float max over a block, row against row: without a NaN, max_f is
 * a > b ? a : b, a loop the compiler vectorizes. False (nothing to keep)
 * when the input holds a NaN: max_f's order of NaNs is then needed. */
static bool max_block(const cpu_op_ctx *c, const reduce_block *b)
{
    const float *x = c->args[0]->f;
    float *y = c->out->f;
    int nan = 0;
    for (int64_t o = 0; o < b->outer; o++) {
        float *yo = y + o * b->inner;
        const float *xo = x + o * b->R * b->inner;
        for (int64_t i = 0; i < b->inner; i++) {
            yo[i] = xo[i];
            nan |= xo[i] != xo[i];
        }
        for (int64_t r = 1; r < b->R; r++) nan |= max_run(yo, xo + r * b->inner, b->inner);
    }
    if (nan) return false;
    round_out(c->out);
    return true;
}

/* A float max over any axes with the last one kept (a max_pool2d's tiles,
 * [B, OH, 2, OW, 2, C] over axes 2 and 4): REDUCE_WALK's order, each run
 * along the channels with max_block's comparison, which vectorizes (max_f's
 * NaN tests keep it element by element: 7.5% of fashion_cnn's training).
 * False when the input holds a NaN, as max_block. */
static bool max_walk(const cpu_op_ctx *c, const int64_t *ostride)
{
    const cpu_tensor *x = c->args[0];
    float *y = c->out->f;
    if (x->rank == 0 || ostride[x->rank - 1] != 1) return false;
    for (int64_t i = 0; i < c->out->numel; i++) y[i] = -INFINITY;
    cpu_walk w;
    walk_init(&w, x->rank, x->shape, ostride);
    int nan = 0;
    const float *xr = x->f;
    for (int64_t r = 0; r < w.runs; r++, walk_next(&w), xr += w.len) {
        nan |= max_run(y + w.off, xr, w.len);
    }
    if (nan) return false;
    round_out(c->out);
    return true;
}

/* NaN wins; an empty reduction gives -inf (ints: the dtype's minimum). */
void cpu_max(const cpu_op_ctx *c)
{
    int64_t ostride[NC_MAX_RANK];
    reduce_strides(c, ostride);
    cpu_tensor *y = c->out;
    reduce_block b;
    if (is_float(c->args[0]) && block_of(c, &b) && max_block(c, &b)) return;
    if (is_float(c->args[0]) && max_walk(c, ostride)) return;
    if (is_float(c->args[0])) {   /* in the result itself: the max of floats is one of them */
        for (int64_t i = 0; i < y->numel; i++) y->f[i] = -INFINITY;
        REDUCE_WALK(float, c->args[0]->f, y->f, max_f);
        round_out(y);
        return;
    }
    double *acc = nc_xmalloc((size_t)(y->numel ? y->numel : 1) * sizeof *acc);
    for (int64_t i = 0; i < y->numel; i++) acc[i] = -INFINITY;
    REDUCE_WALK(double, c->args[0]->i, acc, max_d);
    reduce_finish(y, acc, 1.0);
    free(acc);
}

/* ------------------------------------------------------------------ */
/* row-wise over the last axis                                          */

typedef struct cpu_rows {
    int64_t n, len;   /* rows and their length (the last axis) */
} cpu_rows;

static cpu_rows rows_of(const cpu_tensor *x)
{
    cpu_rows r = {0, x->rank ? x->shape[x->rank - 1] : 1};
    r.n = r.len ? x->numel / r.len : 0;
    return r;
}

/* Max of a row, NaN winning, so a NaN anywhere poisons the whole row. */
static double row_max(const float *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = max_d(m, x[j]);
    return m;
}

/* e[j] = exp(x[j] - max), returns their sum; subtracting the max keeps exp finite. */
static double row_exp(const float *x, int64_t n, double m, double *e)
{
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += e[j] = exp(x[j] - m);
    return s;
}

static void rowwise_softmax(const cpu_op_ctx *c, bool log_form)
{
    cpu_rows r = rows_of(c->args[0]);
    double *e = nc_xmalloc((size_t)(r.len ? r.len : 1) * sizeof *e);
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = c->args[0]->f + i * r.len;
        float *y = c->out->f + i * r.len;
        double m = row_max(x, r.len), s = row_exp(x, r.len, m, e), ls = log(s);
        for (int64_t j = 0; j < r.len; j++) y[j] = (float)(log_form ? x[j] - m - ls : e[j] / s);
    }
    free(e);
    round_out(c->out);
}

void cpu_softmax(const cpu_op_ctx *c) { rowwise_softmax(c, false); }
void cpu_log_softmax(const cpu_op_ctx *c) { rowwise_softmax(c, true); }

/* The backward of (log_)softmax from its output y and gradient g, row by row. */
static void rowwise_softmax_grad(const cpu_op_ctx *c, bool log_form)
{
    cpu_rows r = rows_of(c->args[0]);
    for (int64_t i = 0; i < r.n; i++) {
        const float *y = c->args[0]->f + i * r.len, *g = c->args[1]->f + i * r.len;
        float *dx = c->out->f + i * r.len;
        double s = 0;
        for (int64_t j = 0; j < r.len; j++) s += log_form ? (double)g[j] : (double)g[j] * y[j];
        for (int64_t j = 0; j < r.len; j++) dx[j] = (float)(log_form ? g[j] - exp(y[j]) * s : y[j] * (g[j] - s));
    }
    round_out(c->out);
}

void cpu_softmax_grad(const cpu_op_ctx *c) { rowwise_softmax_grad(c, false); }
void cpu_log_softmax_grad(const cpu_op_ctx *c) { rowwise_softmax_grad(c, true); }

static bool check_vector_arg(const cpu_op_ctx *c, int k, int64_t len)
{
    const cpu_tensor *w = c->args[k];
    if (w->rank == 1 && w->shape[0] == len) return true;
    cpu_fail(c, "%s: operand %d has %lld elements, the last axis has %lld", op_name(c->node->op), k,
             (long long)w->numel, (long long)len);
    return false;
}

/* (x - mean) / sqrt(var + eps) * w + b, biased variance, two passes in double. */
void cpu_layernorm(const cpu_op_ctx *c)
{
    cpu_rows r = rows_of(c->args[0]);
    if (!check_vector_arg(c, 1, r.len) || !check_vector_arg(c, 2, r.len)) return;
    const float *w = c->args[1]->f, *b = c->args[2]->f;
    double eps = c->node->attr.f;
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = c->args[0]->f + i * r.len;
        float *y = c->out->f + i * r.len;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < r.len; j++) mean += x[j];
        mean /= (double)r.len;
        for (int64_t j = 0; j < r.len; j++) var += (x[j] - mean) * (x[j] - mean);
        double sd = sqrt(var / (double)r.len + eps);
        for (int64_t j = 0; j < r.len; j++) y[j] = (float)((x[j] - mean) / sd * w[j] + b[j]);
    }
    round_out(c->out);
}

/* dx = rstd (g w - m1 - xhat m2), m1 = mean(g w) (layernorm only), m2 = mean(g w xhat). */
static void norm_grad(const cpu_op_ctx *c, bool ln)
{
    cpu_rows r = rows_of(c->args[0]);
    if (!check_vector_arg(c, 1, r.len)) return;
    const float *w = c->args[1]->f;
    double eps = c->node->attr.f, n = (double)(r.len ? r.len : 1);
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = c->args[0]->f + i * r.len, *g = c->args[2]->f + i * r.len;
        float *dx = c->out->f + i * r.len;
        double mean = 0, var = 0, m1 = 0, m2 = 0;
        for (int64_t j = 0; j < r.len && ln; j++) mean += x[j];
        mean /= n;
        for (int64_t j = 0; j < r.len; j++) var += (x[j] - mean) * (x[j] - mean);
        double rstd = 1.0 / sqrt(var / n + eps);
        for (int64_t j = 0; j < r.len; j++) {
            double gw = (double)g[j] * w[j];
            m1 += gw;
            m2 += gw * (x[j] - mean) * rstd;
        }
        m1 = ln ? m1 / n : 0, m2 /= n;
        for (int64_t j = 0; j < r.len; j++) dx[j] = (float)(rstd * ((double)g[j] * w[j] - m1 - (x[j] - mean) * rstd * m2));
    }
    round_out(c->out);
}

void cpu_layernorm_grad(const cpu_op_ctx *c) { norm_grad(c, true); }

void cpu_norm_param_grad(const cpu_op_ctx *c)
{
    cpu_rows r = rows_of(c->args[0]);
    int wrt = c->node->attr.axis;
    double eps = c->node->attr.f, n = (double)(r.len ? r.len : 1);
    double *acc = nc_xcalloc((size_t)r.len + 1, sizeof *acc);
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = c->args[0]->f + i * r.len, *g = c->args[1]->f + i * r.len;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < r.len && wrt == 1; j++) mean += x[j];
        mean /= n;
        for (int64_t j = 0; j < r.len && wrt > 0; j++) var += (x[j] - mean) * (x[j] - mean);
        double rstd = 1.0 / sqrt(var / n + eps);
        for (int64_t j = 0; j < r.len; j++) acc[j] += wrt == 0 ? (double)g[j] : (double)g[j] * (x[j] - mean) * rstd;
    }
    for (int64_t j = 0; j < r.len; j++) c->out->f[j] = (float)acc[j];
    free(acc);
    round_out(c->out);
}
void cpu_rmsnorm_grad(const cpu_op_ctx *c) { norm_grad(c, false); }

void cpu_rmsnorm(const cpu_op_ctx *c)
{
    cpu_rows r = rows_of(c->args[0]);
    if (!check_vector_arg(c, 1, r.len)) return;
    const float *w = c->args[1]->f;
    double eps = c->node->attr.f;
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = c->args[0]->f + i * r.len;
        float *y = c->out->f + i * r.len;
        double ms = 0;
        for (int64_t j = 0; j < r.len; j++) ms += (double)x[j] * x[j];
        double rms = sqrt(ms / (double)r.len + eps);
        for (int64_t j = 0; j < r.len; j++) y[j] = (float)(x[j] / rms * w[j]);
    }
    round_out(c->out);
}

/* Per row, with lse = log(sum exp x): nll = lse - x[t] and the smoothing term
 * mean_c(-logp[c]) = lse - mean(x); loss = mean over rows of
 * (1-s)*nll + s*(lse - mean(x)). Logits (..., C), targets (...). */
void cpu_cross_entropy(const cpu_op_ctx *c)
{
    const cpu_tensor *lg = c->args[0], *tg = c->args[1];
    cpu_rows r = rows_of(lg);
    double s = c->node->attr.f, total = 0;
    if (r.n != tg->numel && r.len != 0) {
        cpu_fail(c, "cross_entropy: %lld rows of logits but %lld targets", (long long)r.n, (long long)tg->numel);
        return;
    }
    if (tg->numel == 0) {
        c->out->f[0] = NAN;   /* the mean over no rows, as 0/0 */
        return;
    }
    if (r.len == 0) {
        cpu_fail(c, "cross_entropy: no classes");
        return;
    }
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = lg->f + i * r.len;
        int32_t t = tg->i[i];
        if (t < 0 || t >= r.len) {
            cpu_fail(c, "cross_entropy: target %d out of range [0, %lld) at row %lld", t, (long long)r.len,
                     (long long)i);
            return;
        }
        double m = row_max(x, r.len), se = 0, sx = 0;
        for (int64_t j = 0; j < r.len; j++) {
            se += exp(x[j] - m);
            sx += x[j];
        }
        double lse = m + log(se);
        total += (1.0 - s) * (lse - x[t]) + s * (lse - sx / (double)r.len);
    }
    c->out->f[0] = (float)(total / (double)r.n);
}

/* d loss / d logits of cross_entropy (a mean over rows), given g = d loss:
 * (softmax(x) - (1-s) onehot(t) - s/C) * g / rows, per row in double. */
void cpu_cross_entropy_grad(const cpu_op_ctx *c)
{
    const cpu_tensor *lg = c->args[0], *tg = c->args[1];
    cpu_rows r = rows_of(lg);
    double s = c->node->attr.f, scale = c->args[2]->f[0] / (double)(r.n > 0 ? r.n : 1);
    if (r.n != tg->numel) {
        cpu_fail(c, "cross_entropy_grad: %lld rows of logits but %lld targets", (long long)r.n, (long long)tg->numel);
        return;
    }
    for (int64_t i = 0; i < r.n; i++) {
        const float *x = lg->f + i * r.len;
        int32_t t = tg->i[i];
        if (t < 0 || t >= r.len) {
            cpu_fail(c, "cross_entropy: target %d out of range [0, %lld) at row %lld", t, (long long)r.len, (long long)i);
            return;
        }
        double m = row_max(x, r.len), se = 0;
        for (int64_t j = 0; j < r.len; j++) se += exp(x[j] - m);
        for (int64_t j = 0; j < r.len; j++) {
            double p = exp(x[j] - m) / se, target = (j == t ? 1.0 - s : 0.0) + s / (double)r.len;
            c->out->f[i * r.len + j] = (float)((p - target) * scale);
        }
    }
    round_out(c->out);
}

/* ------------------------------------------------------------------ */
/* attention: a batch's scores as one matmul, softmax statistics in double */

typedef struct attn_dims {
    int64_t batch, T, S, D, E;
    double scale;
    bool causal;
    const int32_t *lens;   /* the key lengths (ir_keyword_operand_slot), NULL: every key */
    int64_t per;           /* batches (q's leading index) per length */
    int64_t skip;          /* rows of a block of the causal skip (0: whole rows; attn_skip_rows) */
} attn_dims;

static void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C);
static void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                    float *C);
static int64_t gemm_slabs(int threads, int al, int64_t M, int64_t N, int64_t K);

/* Causal skip: a block of query rows [i0, i1) sees keys [0, i1) alone, so
 * its products over the keys (q k^T, g v^T) stop there, in blocks of
 * ATTN_SKIP_ROWS rows (a multiple of the split's al, so each block's rows
 * keep the whole product's bits), and exp runs over each row's own keys; the
 * rest of a row is what the mask made of it (-inf scores, zero
 * probabilities). The products over the keys as the sum's index (p v, dS k)
 * keep every key: cutting K moves OpenBLAS's K blocks, and the bits with it.
 * The skip needs products whose columns keep their bits wherever the columns
 * end (attn_skip_probe) and rows cut at multiples of al. */
enum { ATTN_SKIP_ROWS = 32 };
static pthread_once_t attn_skip_once = PTHREAD_ONCE_INIT;
static bool attn_skip_off;       /* cpu_attention_skip_pretend */
static _Atomic int64_t attn_skipped;   /* products' elements the skip left out (cpu_attention_skipped) */

#if NETC_HAVE_CBLAS
/* Whether the skip's products give a whole product's bits when their
 * columns end at multiples of cols (or at the whole's end): q k^T-like
 * products (b transposed) of probe shapes, in blocks of the skip's rows,
 * each over the columns its rows see rounded up to cols, against the whole.
 * OpenBLAS does not keep them for every end: on a Xeon (Haswell kernels) a
 * product ending 3 columns into a block of 16 took other bits there. */
static bool attn_cols_keep_bits(int al, int64_t cols, const float *a, const float *b, float *whole, float *cut)
{
    const int64_t M = 211, N = 223, skip = (ATTN_SKIP_ROWS + al - 1) / al * al;
    static const int64_t Ks[] = {16, 37, 64, 128}, extra[] = {0, 1, -1, 5, 17};
    for (int k = 0; k < (int)NC_COUNT(Ks); k++) {
        gemm(false, true, M, N, Ks[k], a, b, whole);
        for (int e = 0; e < (int)NC_COUNT(extra); e++)
            for (int64_t r0 = 0; r0 < M; r0 += skip) {
                int64_t r1 = r0 + skip < M ? r0 + skip : M, w = (r1 + extra[e] + cols - 1) / cols * cols;
                w = w < N ? w : N;
                gemm(false, true, r1 - r0, w, Ks[k], a + r0 * Ks[k], b, cut);
                for (int64_t r = 0; r < r1 - r0; r++)
                    if (memcmp(cut + r * w, whole + (r0 + r) * N, (size_t)w * sizeof *cut)) return false;
            }
    }
    return true;
}

#endif

/* The fewest columns at multiples of which the skip's products may end (0:
 * none kept the bits, no skip); without a BLAS each element is its own sum
 * in k order. */
static int64_t attn_skip_cols;

static void attn_skip_probe(void)
{
#if NETC_HAVE_CBLAS
    static const int64_t cols[] = {4, 8, 16, 32, 64};
    int al = cpu_gemm_split_rows();
    if (al <= 0) return;
    const int64_t M = 211, N = 223, K = 128;
    float *a = nc_xmalloc((size_t)(M * K) * sizeof *a), *b = nc_xmalloc((size_t)(N * K) * sizeof *b);
    float *whole = nc_xmalloc((size_t)(M * N) * sizeof *whole), *cut = nc_xmalloc((size_t)(M * N) * sizeof *cut);
    uint32_t x = 88675123u;   /* xorshift32 */
    for (int64_t i = 0; i < M * K; i++) x ^= x << 13, x ^= x >> 17, x ^= x << 5, a[i] = (float)x / 4294967296.0f - 0.5f;
    for (int64_t i = 0; i < N * K; i++) x ^= x << 13, x ^= x >> 17, x ^= x << 5, b[i] = (float)x / 2147483648.0f - 1.0f;
    for (int i = 0; i < (int)NC_COUNT(cols) && !attn_skip_cols; i++)
        if (attn_cols_keep_bits(al, cols[i], a, b, whole, cut)) attn_skip_cols = cols[i];
    free(a), free(b), free(whole), free(cut);
#else
    attn_skip_cols = 1;
#endif
}

int64_t cpu_attention_skipped(void) { return attn_skipped; }

void cpu_attention_skip_pretend(bool off) { attn_skip_off = off; }

/* Rows a block of the skip spans (0: no skip) */
static int64_t attn_skip_rows(const attn_dims *d)
{
    if (!d->causal || attn_skip_off) return 0;
    pthread_once(&attn_skip_once, attn_skip_probe);
    int al = cpu_gemm_split_rows();
    if (!attn_skip_cols || al <= 0) return 0;
    return (ATTN_SKIP_ROWS + al - 1) / al * al;
}

static attn_dims attn_dims_of(const cpu_op_ctx *c)
{
    const cpu_tensor *q = c->args[0], *k = c->args[1];
    int r = q->rank, lens = ir_keyword_operand_slot(c->node);
    attn_dims d = {.T = q->shape[r - 2], .S = k->shape[r - 2], .D = q->shape[r - 1], .causal = c->node->attr.causal};
    d.E = c->node->op != OP_ATTENTION_LSE ? c->args[2]->shape[r - 1] : d.D;
    d.batch = d.T > 0 && d.D > 0 ? q->numel / (d.T * d.D) : 0;
    d.scale = c->node->attr.f != 0 ? c->node->attr.f : 1.0 / sqrt((double)(d.D ? d.D : 1));
    if (lens >= 0 && c->args[lens]->numel > 0) {
        d.lens = c->args[lens]->i;
        d.per = d.batch / c->args[lens]->numel;
    }
    d.skip = attn_skip_rows(&d);
    return d;
}

/* The keys batch b sees: its length clamped to [0, S] (a length is data,
 * so one out of range cannot be refused when the model is built). */
static int64_t attn_keys(const attn_dims *d, int64_t b)
{
    if (!d->lens) return d->S;
    int64_t n = d->lens[b / d->per];
    return n < 0 ? 0 : n > d->S ? d->S : n;
}

/* The keys of n that query rows before i1 see */
static int64_t attn_seen(const attn_dims *d, int64_t n, int64_t i1) { return d->causal && i1 < n ? i1 : n; }

/* The keys of n a block of the skip before i1 computes: those it sees, up
 * to a multiple of attn_skip_cols */
static int64_t attn_block_keys(const attn_dims *d, int64_t n, int64_t i1)
{
    int64_t w = (attn_seen(d, n, i1) + attn_skip_cols - 1) / attn_skip_cols * attn_skip_cols;
    return w < n ? w : n;
}

/* C[rows, n] of a product whose columns [w, n) are not computed: the rows
 * gemm wrote packed, w wide, spread out to n wide, fill past w. */
static void attn_spread(float *s, int64_t rows, int64_t w, int64_t n, float fill)
{
    for (int64_t r = rows - 1; r >= 0 && w < n; r--) {
        memmove(s + r * n, s + r * w, (size_t)w * sizeof *s);
        for (int64_t j = w; j < n; j++) s[r * n + j] = fill;
    }
}

/* s[(i1 - i0) * n] = a_i . b_j for rows [i0, i1) of a (lda = K) and the
 * first n rows of b; under the skip, blocks of skip rows, each over the keys
 * it sees, fill elsewhere. */
static void attn_product(const attn_dims *d, int64_t n, int64_t i0, int64_t i1, int64_t K, const float *a,
                         const float *b, float *s, float fill)
{
    int64_t skip = d->skip;
    if (!skip) {
        gemm(false, true, i1 - i0, n, K, a + i0 * K, b, s);
        return;
    }
    for (int64_t r0 = i0, r1; r0 < i1; r0 = r1) {
        r1 = (r0 / skip + 1) * skip < i1 ? (r0 / skip + 1) * skip : i1;
        int64_t w = attn_block_keys(d, n, r1);
        float *c = s + (r0 - i0) * n;
        gemm(false, true, r1 - r0, w, K, a + r0 * K, b, c);
        attn_spread(c, r1 - r0, w, n, fill);
        attn_skipped += (r1 - r0) * (n - w);
    }
}

/* The keys row i scores: every one of n without the skip */
static int64_t attn_row_keys(const attn_dims *d, int64_t n, int64_t i)
{
    return d->skip ? attn_seen(d, n, i + 1) : n;
}

/* The scaled scores of batch b's query rows [i0, i1) over its first n keys,
 * S[i, j] = scale q_i . k_j (one matmul), -inf where masked, into
 * s[(i1 - i0) * n]. */
static void attn_scores(const cpu_op_ctx *c, const attn_dims *d, int64_t b, int64_t n, int64_t i0, int64_t i1,
                        float *s)
{
    attn_product(d, n, i0, i1, d->D, c->args[0]->f + b * d->T * d->D, c->args[1]->f + b * d->S * d->D, s,
                 -INFINITY);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = 0; j < n; j++)
            s[(i - i0) * n + j] = d->causal && j > i ? -INFINITY : (float)(s[(i - i0) * n + j] * d->scale);
}

/* Softmax of row i of s (n keys): the masked keys past the row's own ones
 * are zeros, as their exp of -inf made them. */
static double attn_softmax_row(float *row, int64_t n);

static double attn_softmax_keys(const attn_dims *d, float *row, int64_t n, int64_t i)
{
    int64_t w = attn_row_keys(d, n, i);
    double lse = attn_softmax_row(row, w);
    memset(row + w, 0, (size_t)(n - w) * sizeof *row);
    return lse;
}

/* Row i of s becomes softmax probabilities; returns the row's log-sum-exp. */
static double attn_softmax_row(float *row, int64_t n)
{
    double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < n; j++) m = max_d(m, row[j]);
    for (int64_t j = 0; j < n; j++) l += exp(row[j] - m);
    double lse = m + log(l);
    for (int64_t j = 0; j < n; j++) row[j] = (float)exp(row[j] - lse);
    return lse;
}

static _Atomic int64_t split_shared;   /* kernels that shared their work out (cpu_split_shared) */

/* An attention kernel's work as tiles of the run's crew. With at least as
 * many batch entries as threads a tile is an entry; with fewer, a block of
 * an entry's rows, each block beginning at a multiple of the rows at which a
 * cut product keeps the whole one's bits (cpu_gemm_split_rows). Either way an
 * element of the result comes from one thread, through the one thread's
 * products and arithmetic, so the bits do not depend on the thread count. */
typedef struct attn_job {
    const cpu_op_ctx *c;
    attn_dims d;
    int64_t nblk;          /* blocks an entry's rows are cut into (1: whole entries) */
    int al;                /* blocks begin at multiples of this many rows */
    int64_t b, n;          /* the entry and its keys whose blocks a two-pass gradient runs */
    int64_t kblk;          /* blocks of its key rows in the second pass */
    int nbuf;              /* scratch buffers of a thread (1 or 2) */
    size_t floats;         /* of one scratch buffer */
    float *scratch;        /* a thread's nbuf buffers after another's (two passes: nbuf shared) */
} attn_job;

static float *attn_buf(const attn_job *j, int thread, int which)
{
    return j->scratch + ((size_t)thread * (size_t)j->nbuf + (size_t)which) * j->floats;
}

/* Block s of nblk over rows: a multiple of al near s / nblk of them. */
static int64_t attn_block_row(int64_t rows, int64_t nblk, int al, int64_t s)
{
    return s == nblk ? rows : rows * s / nblk / al * al;
}

/* Fewer entries than threads: a block a thread, as a product's slabs
 * (gemm_slabs: at most one a thread, each worth its wake-up). A few more
 * entries than threads but not a multiple of them (3 heads on 2 threads: 2
 * and 1): each entry's rows in blocks enough that every thread has as many
 * (3 x 2 blocks, 3 a thread), where the rows allow blocks of al; many: whole
 * entries, one thread's extra one a small part of the rest. */
int64_t cpu_attention_blocks(int64_t batch, int64_t T, int64_t S, int64_t DE, int threads)
{
    int al = cpu_gemm_split_rows();
    if (threads < 2 || al <= 0 || batch < 1) return 1;
    if (batch < threads) return gemm_slabs(threads, al, T, S, DE);
    if (batch % threads == 0 || batch >= 4 * threads) return 1;
    int64_t g = threads, r = batch % threads;
    while (r) {   /* gcd(batch, threads) */
        int64_t t = g % r;
        g = r, r = t;
    }
    int64_t nblk = threads / g;
    return nblk <= T / al ? nblk : 1;
}

/* The crew for j's kernel and how its entries are cut (j->nblk), or NULL:
 * the calling thread alone, whole entries. */
static cpu_crew *attn_crew(attn_job *j)
{
    const attn_dims *d = &j->d;
    double work = (double)d->batch * d->T * d->S * (d->D + d->E);
    cpu_crew *crew = d->batch > 0 ? cpu_split_crew(j->c, work) : NULL;
    int threads = cpu_crew_size(crew);
    int al = cpu_gemm_split_rows();
    j->al = al > 0 ? al : 1;
    j->nblk = crew ? cpu_attention_blocks(d->batch, d->T, d->S, d->D + d->E, threads) : 1;
    if (j->nblk == 1 && d->batch < 2) crew = NULL;
    if (crew) split_shared++;
    return crew;
}

/* Scratch of nbuf buffers of rows x S floats (+ 1: never empty) from the
 * run's pool, so its memory counts in the pool's peak; returns its bytes. */
static size_t attn_scratch(attn_job *j, int nbuf, int64_t rows)
{
    j->floats = (size_t)(rows * j->d.S + 1);
    size_t bytes = (size_t)nbuf * j->floats * sizeof *j->scratch;
    j->scratch = cpu_kernel_scratch(j->c, bytes);
    return bytes;
}

/* The most rows a block of T cut in nblk has */
static int64_t attn_block_most(int64_t T, int64_t nblk, int al)
{
    int64_t rows = 0;
    for (int64_t s = 0; s < nblk; s++) {
        int64_t r = attn_block_row(T, nblk, al, s + 1) - attn_block_row(T, nblk, al, s);
        rows = r > rows ? r : rows;
    }
    return rows;
}

/* fn over j's tiles (batch x nblk), each thread with nbuf buffers of scores
 * for the most rows a tile has. */
static void attn_tiles(attn_job *j, cpu_crew *crew, int nbuf, cpu_crew_fn *fn)
{
    int64_t rows = attn_block_most(j->d.T, j->nblk, j->al);
    j->nbuf = nbuf;
    size_t bytes = attn_scratch(j, cpu_crew_size(crew) * nbuf, rows);
    int failed;
    cpu_crew_run(crew, j->d.batch * j->nblk, fn, j, &failed);
    cpu_kernel_scratch_done(j->c, j->scratch, bytes);
}

/* Tile t's entry and its query rows [*i0, *i1). */
static int64_t attn_tile_rows(const attn_job *j, int64_t t, int64_t *i0, int64_t *i1)
{
    int64_t s = t % j->nblk;
    *i0 = attn_block_row(j->d.T, j->nblk, j->al, s);
    *i1 = attn_block_row(j->d.T, j->nblk, j->al, s + 1);
    return t / j->nblk;
}

static int attn_out_tile(void *ctx, int64_t t, int thread)
{
    attn_job *j = ctx;
    const attn_dims *d = &j->d;
    int64_t i0, i1, b = attn_tile_rows(j, t, &i0, &i1), n = attn_keys(d, b);
    float *out = j->c->out->f + (b * d->T + i0) * d->E;
    if (n == 0) {   /* no key seen: zeros, not 0/0 */
        memset(out, 0, (size_t)((i1 - i0) * d->E) * sizeof *out);
        return 0;
    }
    float *s = attn_buf(j, thread, 0);
    attn_scores(j->c, d, b, n, i0, i1, s);
    for (int64_t i = 0; i < i1 - i0; i++) attn_softmax_keys(d, s + i * n, n, i0 + i);
    gemm(false, false, i1 - i0, d->E, n, s, j->c->args[2]->f + b * d->S * d->E, out);
    return 0;
}

void cpu_attention(const cpu_op_ctx *c)
{
    attn_job j = {.c = c, .d = attn_dims_of(c)};
    attn_tiles(&j, attn_crew(&j), 1, attn_out_tile);
    round_out(c->out);
}

static int attn_lse_tile(void *ctx, int64_t t, int thread)
{
    attn_job *j = ctx;
    const attn_dims *d = &j->d;
    int64_t i0, i1, b = attn_tile_rows(j, t, &i0, &i1), n = attn_keys(d, b);
    float *s = attn_buf(j, thread, 0), *out = j->c->out->f + b * d->T;
    if (n > 0) attn_scores(j->c, d, b, n, i0, i1, s);
    for (int64_t i = i0; i < i1; i++) out[i] = n > 0 ? (float)attn_softmax_keys(d, s + (i - i0) * n, n, i) : -INFINITY;
    return 0;
}

void cpu_attention_lse(const cpu_op_ctx *c)
{
    attn_job j = {.c = c, .d = attn_dims_of(c)};
    attn_tiles(&j, attn_crew(&j), 1, attn_lse_tile);
}

/* With P = softmax rows (rebuilt from lse), dP = g v^T and
 * dS = P (dP - delta): dq = scale dS k, dk = scale dS^T q, dv = P^T g.
 * Keys past a batch's length get zero gradients.
 *
 * P's rows [i0, i1) of entry b (n > 0 keys) into p, and dS's into ds
 * (NULL: P alone), row i0 first. */
static void attn_grad_rows(const attn_job *j, int64_t b, int64_t n, int64_t i0, int64_t i1, float *p, float *ds)
{
    const cpu_op_ctx *c = j->c;
    const attn_dims *d = &j->d;
    const float *lse = c->args[4]->f + b * d->T, *delta = c->args[5]->f + b * d->T;
    attn_scores(c, d, b, n, i0, i1, p);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t x = 0, w = attn_row_keys(d, n, i); x < n; x++)
            p[(i - i0) * n + x] = x < w ? (float)exp((double)p[(i - i0) * n + x] - lse[i]) : 0.0f;
    if (!ds) return;
    attn_product(d, n, i0, i1, d->E, c->args[3]->f + b * d->T * d->E, c->args[2]->f + b * d->S * d->E, ds, 0.0f);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t x = 0, w = attn_row_keys(d, n, i); x < n; x++) {
            int64_t e = (i - i0) * n + x;
            ds[e] = x < w ? (float)(p[e] * ((double)ds[e] - delta[i]) * d->scale) : 0.0f;
        }
}

/* Gradient rows [r0, r1) of entry b (n > 0 keys) from its P or dS, a:
 * dq's are query rows (a holds rows [r0, r1) of it), dk's and dv's key rows
 * (a holds all T query rows; the rows are its columns). */
static void attn_grad_out(const attn_job *j, int64_t b, int64_t n, int64_t r0, int64_t r1, const float *a)
{
    const cpu_op_ctx *c = j->c;
    const attn_dims *d = &j->d;
    int wrt = c->node->attr.axis;
    if (wrt == 0) {
        gemm(false, false, r1 - r0, d->D, n, a, c->args[1]->f + b * d->S * d->D, c->out->f + (b * d->T + r0) * d->D);
        return;
    }
    int64_t width = wrt == 2 ? d->E : d->D;
    const float *x = wrt == 2 ? c->args[3]->f + b * d->T * d->E : c->args[0]->f + b * d->T * d->D;
    gemm_ld(true, false, r1 - r0, width, d->T, a + r0, n, x, c->out->f + (b * d->S + r0) * width);
}

/* Zeros where entry b's gradient has no key to come from (dq: its query
 * rows [i0, i1) alone); returns the keys it sees. */
static int64_t attn_grad_zero(const attn_job *j, int64_t b, int64_t i0, int64_t i1)
{
    const attn_dims *d = &j->d;
    int wrt = j->c->node->attr.axis;
    int64_t n = attn_keys(d, b), width = wrt == 2 ? d->E : d->D, rows = wrt == 0 ? i1 - i0 : d->S;
    float *out = j->c->out->f + (wrt == 0 ? b * d->T + i0 : b * d->S) * width;
    if (n == 0 || (wrt > 0 && n < d->S)) memset(out, 0, (size_t)(rows * width) * sizeof *out);
    return n;
}

/* A whole entry's dq, dk or dv, or a block of dq's query rows. */
static int attn_grad_tile(void *ctx, int64_t t, int thread)
{
    attn_job *j = ctx;
    int64_t i0, i1, b = attn_tile_rows(j, t, &i0, &i1), n = attn_grad_zero(j, b, i0, i1);
    if (n == 0) return 0;
    float *p = attn_buf(j, thread, 0), *ds = j->nbuf > 1 ? attn_buf(j, thread, 1) : NULL;
    attn_grad_rows(j, b, n, i0, i1, p, ds);
    if (j->c->node->attr.axis == 0) attn_grad_out(j, b, n, i0, i1, ds);
    else attn_grad_out(j, b, n, 0, n, ds ? ds : p);
    return 0;
}

/* dk or dv of entry j->b cut over threads: every key row sums over all the
 * query rows, so a first pass fills P (and dS) in blocks of query rows, each
 * row by one tile, and a second takes the product in blocks of key rows. */
static int attn_grad_pass1(void *ctx, int64_t s, int thread)
{
    (void)thread;
    attn_job *j = ctx;
    int64_t i0 = attn_block_row(j->d.T, j->nblk, j->al, s), i1 = attn_block_row(j->d.T, j->nblk, j->al, s + 1);
    float *ds = j->nbuf > 1 ? attn_buf(j, 0, 1) + i0 * j->n : NULL;
    attn_grad_rows(j, j->b, j->n, i0, i1, attn_buf(j, 0, 0) + i0 * j->n, ds);
    return 0;
}

static int attn_grad_pass2(void *ctx, int64_t s, int thread)
{
    (void)thread;
    attn_job *j = ctx;
    int64_t r0 = attn_block_row(j->n, j->kblk, j->al, s), r1 = attn_block_row(j->n, j->kblk, j->al, s + 1);
    attn_grad_out(j, j->b, j->n, r0, r1, attn_buf(j, 0, j->nbuf - 1));
    return 0;
}

static void attn_grad_keys(attn_job *j, cpu_crew *crew)
{
    const attn_dims *d = &j->d;
    int wrt = j->c->node->attr.axis;
    j->nbuf = wrt == 2 ? 1 : 2;
    size_t bytes = attn_scratch(j, j->nbuf, d->T);
    for (j->b = 0; j->b < d->batch; j->b++) {
        if ((j->n = attn_grad_zero(j, j->b, 0, d->T)) == 0) continue;
        j->kblk = gemm_slabs(cpu_crew_size(crew), j->al, j->n, d->T, wrt == 2 ? d->E : d->D);
        int failed;
        cpu_crew_run(crew, j->nblk, attn_grad_pass1, j, &failed);
        cpu_crew_run(crew, j->kblk, attn_grad_pass2, j, &failed);
    }
    cpu_kernel_scratch_done(j->c, j->scratch, bytes);
}

void cpu_attention_grad(const cpu_op_ctx *c)
{
    attn_job j = {.c = c, .d = attn_dims_of(c)};
    int wrt = c->node->attr.axis;
    cpu_crew *crew = attn_crew(&j);
    if (wrt > 0 && j.nblk > 1) attn_grad_keys(&j, crew);
    else attn_tiles(&j, crew, wrt == 2 ? 1 : 2, attn_grad_tile);
    round_out(c->out);
}

/* ------------------------------------------------------------------ */
/* matmul                                                               */

#if !NETC_HAVE_CBLAS
enum { GEMM_ROWS = 8 };

/* Without BLAS (the GPU machine's build), sums in double over k in order.
 * B stored [N, K]: dot products along rows of both operands, GEMM_ROWS rows
 * of A at a time, so each row of B is read once per GEMM_ROWS rows of C (a
 * language model's head reads a B of 150 MB; one term a cache miss, as a
 * walk down B's columns made it, took minutes). */
static void gemm_rows_tb(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                         float *C)
{
    double *a = nc_xmalloc((size_t)(GEMM_ROWS * K) * sizeof *a);
    for (int64_t i0 = 0; i0 < M; i0 += GEMM_ROWS) {
        int64_t rows = M - i0 < GEMM_ROWS ? M - i0 : GEMM_ROWS;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < K; k++) a[r * K + k] = ta ? A[k * lda + i0 + r] : A[(i0 + r) * lda + k];
        for (int64_t j = 0; j < N; j++) {
            const float *b = B + j * K;
            double sum[GEMM_ROWS] = {0};
            if (rows == GEMM_ROWS) {
                for (int64_t k = 0; k < K; k++)
                    for (int r = 0; r < GEMM_ROWS; r++) sum[r] += a[r * K + k] * b[k];
            } else {
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t k = 0; k < K; k++) sum[r] += a[r * K + k] * b[k];
            }
            for (int64_t r = 0; r < rows; r++) C[(i0 + r) * N + j] = (float)sum[r];
        }
    }
    free(a);
}
#endif

#if CPU_OPENBLAS
/* One BLAS thread unless the environment asks for more (OPENBLAS_NUM_THREADS,
 * GOTO_NUM_THREADS, OMP_NUM_THREADS): OpenBLAS splits a product differently
 * with more threads, so the bits of a result would depend on the machine's core
 * count, and its idle threads spin (sched_yield) on the cores the rest of a
 * training step needs. On a shared 2-core EPYC one thread trained fashion_mlp
 * as fast as two, with half the system time. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_threads_init(void)
{
    if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("GOTO_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
        openblas_set_num_threads(1);
}
#endif

int cpu_blas_threads(void)
{
#if CPU_OPENBLAS
    pthread_once(&blas_once, blas_threads_init);
    return openblas_get_num_threads();
#else
    return 1;
#endif
}

/* C[M, N] = op(A) op(B), row-major; op(A) = A^T when ta (A stored [K, lda]
 * columns, else [M, lda]); B dense. */
static void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                    float *C)
{
    if (M == 0 || N == 0) return;
    if (K == 0) {   /* empty sum; BLAS rejects a zero leading dimension */
        memset(C, 0, (size_t)(M * N) * sizeof *C);
        return;
    }
#if NETC_HAVE_CBLAS
#if CPU_OPENBLAS
    pthread_once(&blas_once, blas_threads_init);
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, 1.0f, A, (int)lda, B, (int)(tb ? K : N), 0.0f, C, (int)N);
#else
    if (tb) {
        gemm_rows_tb(ta, M, N, K, A, lda, B, C);
        return;
    }
    /* i-k-j, so B is read along its rows */
    double *acc = nc_xmalloc((size_t)N * sizeof *acc);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) acc[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            double a = ta ? A[k * lda + i] : A[i * lda + k];
            for (int64_t j = 0; j < N; j++) acc[j] += a * B[k * N + j];
        }
        for (int64_t j = 0; j < N; j++) C[i * N + j] = (float)acc[j];
    }
    free(acc);
#endif
}

/* C[M, N] = op(A) op(B), row-major; op(A) = A^T when ta (A stored [K, M]). */
static void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C)
{
    gemm_ld(ta, tb, M, N, K, A, ta ? M : K, B, C);
}

/* Splitting a product's rows over threads. Each slab is a product of its own
 * on one BLAS thread, over the same K: an element's bits stay those of the
 * whole product only if the BLAS computes a row the same way wherever a slab
 * begins. OpenBLAS does not for every cut: on Zen (Haswell kernels) a row in
 * a block of 12 that a cut breaks up takes an edge kernel with other bits, so
 * slabs begin at multiples of a row count a probe found safe (split_probe),
 * and a BLAS that splits on its own threads is never split further. */
enum {
    SPLIT_PROBE_M = 211, SPLIT_PROBE_N = 37, SPLIT_PROBE_K = 1000,   /* K past one K block (GEMM_Q) */
    SPLIT_MIN_WORK = 1 << 21,   /* multiply-adds a slab must have to be worth a thread's wake-up */
};
static pthread_once_t split_once = PTHREAD_ONCE_INIT;
static cpu_blas_kind blas_kind;  /* the linked BLAS's, found by split_probe */
static int split_rows;          /* slabs begin at multiples of this; 0: products are not split */
/* cpu_split_pretend's, in place of the machine's */
static double pretend_load = -1;
static cpu_blas_kind pretend_blas = CPU_BLAS_REAL;

#if NETC_HAVE_CBLAS
/* Slabs of al rows each (the last shorter) give the whole product's bits,
 * in all four transpositions. */
static bool split_keeps_bits(int al, const float *A, const float *B, float *whole, float *cut)
{
    const int64_t M = SPLIT_PROBE_M, N = SPLIT_PROBE_N, K = SPLIT_PROBE_K;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int64_t lda = ta ? M : K;
        gemm_ld(ta, tb, M, N, K, A, lda, B, whole);
        for (int64_t r = 0; r < M; r += al)
            gemm_ld(ta, tb, M - r < al ? M - r : al, N, K, A + (ta ? r : r * lda), lda, B, cut + r * N);
        if (memcmp(whole, cut, (size_t)(M * N) * sizeof *cut)) return false;
    }
    return true;
}
#endif

static void split_probe(void)
{
#if NETC_HAVE_CBLAS
    blas_kind = CPU_BLAS_THREADED;
    if (cpu_blas_threads() != 1) return;
    blas_kind = CPU_BLAS_SERIAL;
#if CPU_OPENBLAS
    /* a serial OpenBLAS need not be safe to call from two threads at once
       (built without USE_LOCKING); the pthreads build is */
    if (openblas_get_parallel() != 1) return;
#endif
    blas_kind = CPU_BLAS_ONE_THREAD;
    static const int rows[] = {12, 16, 24, 32, 48, 64, 96};
    const int64_t M = SPLIT_PROBE_M, N = SPLIT_PROBE_N, K = SPLIT_PROBE_K;
    float *A = nc_xmalloc((size_t)(M * K) * sizeof *A), *B = nc_xmalloc((size_t)(K * N) * sizeof *B);
    float *whole = nc_xmalloc((size_t)(M * N) * sizeof *whole), *cut = nc_xmalloc((size_t)(M * N) * sizeof *cut);
    uint32_t x = 2463534242u;   /* xorshift32: values of every magnitude's rounding */
    for (int64_t i = 0; i < M * K; i++) x ^= x << 13, x ^= x >> 17, x ^= x << 5, A[i] = (float)x / 4294967296.0f - 0.5f;
    for (int64_t i = 0; i < K * N; i++) x ^= x << 13, x ^= x >> 17, x ^= x << 5, B[i] = (float)x / 2147483648.0f - 1.0f;
    for (int i = 0; i < (int)NC_COUNT(rows) && !split_rows; i++)
        if (split_keeps_bits(rows[i], A, B, whole, cut)) split_rows = rows[i];
    free(A), free(B), free(whole), free(cut);
#else
    blas_kind = CPU_BLAS_ONE_THREAD;
    split_rows = GEMM_ROWS;   /* each row's sum is its own, in k order */
#endif
}

/* Several threads may call the BLAS at once, each on one thread of its own. */
static bool blas_concurrent(void)
{
    pthread_once(&split_once, split_probe);
    return (pretend_blas != CPU_BLAS_REAL ? pretend_blas : blas_kind) == CPU_BLAS_ONE_THREAD;
}

int cpu_gemm_split_rows(void) { return blas_concurrent() ? split_rows : 0; }

void cpu_split_pretend(double load, cpu_blas_kind blas)
{
    pretend_load = load;
    pretend_blas = blas;
}

int64_t cpu_split_shared(void) { return split_shared; }

/* Slabs for a product of M rows on threads, beginning at multiples of al
 * rows: at most one a thread, each of SPLIT_MIN_WORK or more and at least al
 * rows; 1 when not split. */
static int64_t gemm_slabs(int threads, int al, int64_t M, int64_t N, int64_t K)
{
    if (threads < 2 || al == 0) return 1;
    int64_t n = M / al < threads ? M / al : threads;
    while (n > 1 && (double)M * N * K / n < SPLIT_MIN_WORK) n--;
    return n < 1 ? 1 : n;
}

/* A batch of products, each cut into nslab slabs of rows: tile t is slab
 * t % nslab of product t / nslab. */
typedef struct gemm_job {
    bool ta, tb;
    int64_t M, N, K, nslab;
    int al;                      /* slabs begin at multiples of al rows */
    const float *A, *B;
    float *C;
    bool b_shared;               /* one B for every product of the batch */
} gemm_job;

/* Slab s's first row: a multiple of al near s / nslab of the rows. */
static int64_t slab_row(const gemm_job *j, int64_t s)
{
    return s == j->nslab ? j->M : j->M * s / j->nslab / j->al * j->al;
}

static int gemm_tile(void *ctx, int64_t tile, int thread)
{
    (void)thread;
    const gemm_job *j = ctx;
    int64_t i = tile / j->nslab, s = tile % j->nslab, r0 = slab_row(j, s), r1 = slab_row(j, s + 1);
    int64_t lda = j->ta ? j->M : j->K;
    const float *a = j->A + i * j->M * j->K + (j->ta ? r0 : r0 * lda);
    const float *b = j->b_shared ? j->B : j->B + i * j->K * j->N;
    gemm_ld(j->ta, j->tb, r1 - r0, j->N, j->K, a, lda, b, j->C + i * j->M * j->N + r0 * j->N);
    return 0;
}

int64_t cpu_gemm_batch(cpu_crew *crew, bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                       const float *A, const float *B, bool b_shared, float *C)
{
    if (!blas_concurrent()) crew = NULL;   /* products side by side too */
    int threads = cpu_crew_size(crew), al = threads > 1 && batch == 1 ? split_rows : 0;
    gemm_job j = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C, .b_shared = b_shared,
                  .al = al ? al : 1, .nslab = gemm_slabs(threads, al, M, N, K)};
    /* whole products side by side: same bits trivially */
    if (j.nslab == 1 && (batch < 2 || (double)batch * M * N * K < SPLIT_MIN_WORK)) crew = NULL;
    int failed;
    if (crew) split_shared++;
    cpu_crew_run(crew, batch * j.nslab, gemm_tile, &j, &failed);
    return crew ? batch * j.nslab : 1;
}

/* The machine's cores are all taken (its 1-minute load average, which counts
 * this run's own thread, is at least threads): a slab on a worker the system
 * preempts holds the whole product up. On the shared 2-core EPYC at load 9 to
 * 13, where two threads of independent work ran no faster than one, a
 * fashion_mlp product (128 x 784 by 784 x 1024) took a median 13.5 ms in two
 * slabs against 4.9 ms whole (100 of each, alternated): one thread ran both
 * slabs while the other sat preempted. */
static bool cores_busy(int threads)
{
    if (pretend_load >= 0) return pretend_load >= threads;
    FILE *f = fopen("/proc/loadavg", "r");
    double load = 0;
    bool busy = f && fscanf(f, "%lf", &load) == 1 && load >= threads;
    if (f) fclose(f);
    return busy;
}

cpu_crew *cpu_split_crew(const cpu_op_ctx *c, double work)
{
    if (!c->crew || work < 2.0 * SPLIT_MIN_WORK || !blas_concurrent()) return NULL;   /* else no thread need start */
    cpu_crew *crew = c->crew(c->run);
    return crew && !cores_busy(cpu_crew_size(crew)) ? crew : NULL;
}

/* As attn_crew, attn_tiles and attn_grad_keys choose, on a crew of threads
 * whenever one is worth it (the load's gate taken as open: the most). */
int64_t cpu_attention_scratch_bytes(nc_op op, int wrt, int64_t batch, int64_t T, int64_t S, int64_t D, int64_t E,
                                    int threads)
{
    if (op == OP_ATTENTION_LSE) E = D;
    int nbuf = op == OP_ATTENTION_GRAD && wrt != 2 ? 2 : 1, al = cpu_gemm_split_rows();
    bool crew = threads > 1 && batch > 0 && (double)batch * T * S * (D + E) >= 2.0 * SPLIT_MIN_WORK && blas_concurrent();
    int64_t nblk = crew ? cpu_attention_blocks(batch, T, S, D + E, threads) : 1;
    if (nblk == 1 && batch < 2) crew = false;
    int64_t bufs = op == OP_ATTENTION_GRAD && wrt > 0 && nblk > 1 ? nbuf : (crew ? threads : 1) * nbuf;
    int64_t rows = op == OP_ATTENTION_GRAD && wrt > 0 && nblk > 1 ? T : attn_block_most(T, nblk, al > 0 ? al : 1);
    return bufs * (rows * S + 1) * (int64_t)sizeof(float);
}

/* (..., M, K) x (..., K, N) or (K, N) -> (..., M, N); ta/tb swap an operand's last two axes. */
void cpu_matmul(const cpu_op_ctx *c)
{
    const cpu_tensor *a = c->args[0], *b = c->args[1];
    cpu_tensor *y = c->out;
    bool ta = c->node->attr.ta, tb = c->node->attr.tb;
    int ra = a->rank, rb = b->rank;
    if (ra < 2 || rb < 2 || y->rank != ra) {
        cpu_fail(c, "matmul: bad operand ranks %d and %d", ra, rb);
        return;
    }
    int64_t M = y->shape[ra - 2], N = y->shape[ra - 1], K = a->shape[ra - (ta ? 2 : 1)];
    int64_t kb = b->shape[rb - (tb ? 1 : 2)], batch = span(a, 0, ra - 2);
    if (kb != K || (rb != 2 && span(b, 0, rb - 2) != batch)) {
        cpu_fail(c, "matmul: operand shapes do not fit (K %lld vs %lld)", (long long)K, (long long)kb);
        return;
    }
    bool flat = rb == 2 && !ta;   /* a's batch rows are contiguous: one product */
    int64_t rows = flat ? batch * M : M;
    if (rows > INT_MAX || N > INT_MAX || K > INT_MAX) {
        cpu_fail(c, "matmul: a dimension over %d is too large for the BLAS interface", INT_MAX);
        return;
    }
    cpu_crew *crew = cpu_split_crew(c, (double)(flat ? rows : batch * M) * N * K);
    if (flat) cpu_gemm_batch(crew, false, tb, 1, rows, N, K, a->f, b->f, true, y->f);
    else cpu_gemm_batch(crew, ta, tb, batch, M, N, K, a->f, b->f, rb == 2, y->f);
    round_out(y);
}

/* ------------------------------------------------------------------ */
/* data movement                                                        */

/* Out axis i is in axis perm[i]. */
void cpu_transpose(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->args[0];
    int64_t st[NC_MAX_RANK], pst[NC_MAX_RANK];
    strides_of(x, st);
    for (int i = 0; i < x->rank; i++) {
        int p = c->node->attr.axes[i];
        if (c->node->attr.naxes != x->rank || p < 0 || p >= x->rank || c->out->shape[i] != x->shape[p]) {
            cpu_fail(c, "transpose: bad permutation");
            return;
        }
        pst[i] = st[p];
    }
    gather_strided(x, c->out, pst);
}

void cpu_reshape(const cpu_op_ctx *c)
{
    if (c->args[0]->numel != c->out->numel) {
        cpu_fail(c, "reshape: %lld elements into %lld", (long long)c->args[0]->numel,
                 (long long)c->out->numel);
        return;
    }
    copy_elems(bytes_of(c->out), 0, bytes_of(c->args[0]), 0, c->out->numel);
}

void cpu_copy(const cpu_op_ctx *c) { copy_elems(bytes_of(c->out), 0, bytes_of(c->args[0]), 0, c->out->numel); }

/* Bounds are dims evaluated at this binding, so they are checked here too:
 * a symbolic end can pass sema and still be past the axis. */
void cpu_slice(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->args[0];
    int ax = c->node->attr.axis;
    int64_t lo, hi;
    if (ax < 0 || ax >= x->rank) {
        cpu_fail(c, "slice: axis %d out of range for rank %d", ax, x->rank);
        return;
    }
    if (!dim_value(c, c->node->attr.lo, &lo) || !dim_value(c, c->node->attr.hi, &hi)) {
        cpu_fail(c, "slice: bounds do not evaluate at this binding");
        return;
    }
    int64_t d = x->shape[ax];
    if (lo < 0 || hi < lo || hi > d || c->out->shape[ax] != hi - lo) {
        cpu_fail(c, "slice: range [%lld, %lld) out of bounds for an axis of size %lld", (long long)lo,
                 (long long)hi, (long long)d);
        return;
    }
    int64_t outer = span(x, 0, ax), inner = span(x, ax + 1, x->rank), len = (hi - lo) * inner;
    for (int64_t o = 0; o < outer; o++)
        copy_elems(bytes_of(c->out), o * len, bytes_of(x), (o * d + lo) * inner, len);
}

void cpu_concat(const cpu_op_ctx *c)
{
    cpu_tensor *y = c->out;
    int ax = c->node->attr.axis;
    if (ax < 0 || ax >= y->rank) {
        cpu_fail(c, "concat: axis %d out of range for rank %d", ax, y->rank);
        return;
    }
    int64_t total = 0;
    for (int k = 0; k < c->node->nargs; k++) total += c->args[k]->shape[ax];
    if (total != y->shape[ax]) {
        cpu_fail(c, "concat: operand sizes do not add up");
        return;
    }
    int64_t outer = span(y, 0, ax), inner = span(y, ax + 1, y->rank), pos = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < c->node->nargs; k++) {
            int64_t len = c->args[k]->shape[ax] * inner;
            copy_elems(bytes_of(y), pos, bytes_of(c->args[k]), o * len, len);
            pos += len;
        }
}

/* The whole result's shape: a chain's tile (cpu_op_ctx.whole) is rank 1,
 * and the node's own dims give it. Its rank, or -1 (failed). */
static int whole_shape(const cpu_op_ctx *c, int64_t *shape)
{
    if (!c->whole) {
        memcpy(shape, c->out->shape, (size_t)c->out->rank * sizeof *shape);
        return c->out->rank;
    }
    int64_t numel = 1;
    for (int i = 0; i < c->node->rank; i++) {
        if (!dim_value(c, c->node->shape[i], &shape[i])) {
            cpu_fail(c, "%s: axis %d of the result has no value at this binding", op_name(c->node->op), i);
            return -1;
        }
        numel *= shape[i];
    }
    if (numel != c->whole || c->first < 0 || c->first > c->whole - c->out->numel) {
        cpu_fail(c, "%s: the tile does not fit the result", op_name(c->node->op));
        return -1;
    }
    return c->node->rank;
}

/* Numpy alignment: trailing axes line up; a size-1 or missing axis repeats
 * (stride 0). The whole result or a chain's tile of it. */
void cpu_broadcast(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->args[0];
    int64_t st[NC_MAX_RANK], bst[NC_MAX_RANK], shape[NC_MAX_RANK];
    int rank = whole_shape(c, shape), lead = rank - x->rank;
    if (rank < 0) return;
    if (lead < 0) {
        cpu_fail(c, "broadcast: rank %d to rank %d", x->rank, rank);
        return;
    }
    strides_of(x, st);
    for (int i = 0; i < rank; i++) {
        int k = i - lead;
        if (k >= 0 && x->shape[k] != 1 && x->shape[k] != shape[i]) {
            cpu_fail(c, "broadcast: axis %d has size %lld, cannot broadcast to %lld", k,
                     (long long)x->shape[k], (long long)shape[i]);
            return;
        }
        bst[i] = k < 0 || x->shape[k] == 1 ? 0 : st[k];
    }
    if (c->whole) gather_strided_part(x, c->out, rank, shape, bst, c->first);
    else gather_strided(x, c->out, bst);
}

#define GATHER_FIXED(R)                                                                            \
    for (int64_t k_ = 0; k_ < rows; k_++)                                                          \
    memcpy(dst + k_ * (R) * CPU_ELEM_BYTES, src + (int64_t)ix[k_] * (R) * CPU_ELEM_BYTES, (R) * CPU_ELEM_BYTES)

/* out, whole rows: table rows ix[0 .. rows). */
static void gather_rows(const cpu_tensor *tab, const int32_t *ix, int64_t rows, int64_t row, cpu_tensor *out)
{
    if (row == 1) {   /* one element a row (a one-channel image's windows): no memcpy call each */
        if (is_float(tab)) {
            for (int64_t k = 0; k < rows; k++) out->f[k] = tab->f[ix[k]];
        } else {
            for (int64_t k = 0; k < rows; k++) out->i[k] = tab->i[ix[k]];
        }
        return;
    }
    char *dst = bytes_of(out);
    const char *src = bytes_of(tab);
    switch (row) {   /* a few channels: a copy of a known size, which the compiler inlines */
    case 8: GATHER_FIXED(8); break;
    case 16: GATHER_FIXED(16); break;
    case 32: GATHER_FIXED(32); break;
    case 64: GATHER_FIXED(64); break;
    default:
        for (int64_t k = 0; k < rows; k++) copy_elems(dst, k * row, src, ix[k] * row, row);
    }
}

/* table (V, ...rest), idx (...) -> (...idx, ...rest), or a tile of it
 * (cpu_op_ctx.first, whole), which may begin and end inside a row.
 * An index outside [0, V) fails the run with a message rather than reading
 * out of bounds. */
void cpu_gather(const cpu_op_ctx *c)
{
    const cpu_tensor *tab = c->args[0], *idx = c->args[1];
    int64_t V = tab->rank ? tab->shape[0] : 0, row = span(tab, 1, tab->rank), n = c->out->numel;
    int64_t whole = c->whole ? c->whole : n;
    if (whole != idx->numel * row || c->first < 0 || c->first > whole - n) {
        cpu_fail(c, "gather: result size does not fit the operands");
        return;
    }
    if (n == 0) return;
    int64_t k0 = c->first / row, k1 = (c->first + n - 1) / row + 1;   /* the index rows the elements are in */
    for (int64_t k = k0; k < k1; k++) {
        int32_t v = idx->i[k];
        if (v < 0 || v >= V) {
            cpu_fail(c, "gather: index %d out of range [0, %lld)", v, (long long)V);
            return;
        }
    }
    if (c->first % row == 0 && n % row == 0) {
        gather_rows(tab, idx->i + k0, k1 - k0, row, c->out);
        return;
    }
    for (int64_t done = 0; done < n;) {   /* a tile that cuts rows: piece by piece */
        int64_t e = c->first + done, j = e % row, len = row - j < n - done ? row - j : n - done;
        copy_elems(bytes_of(c->out), done, bytes_of(tab), (int64_t)idx->i[e / row] * row + j, len);
        done += len;
    }
}

/* idx (...), src (...idx, ...rest) -> (rows, ...rest): zeros, then each src
 * row added at its index. Sums in double, so repeated indices do not depend
 * on the order of the additions. */
#define SCATTER_BLOCK_ELEMS ((int64_t)1 << 17)   /* a block's doubles: 1 MiB */

void cpu_scatter_add(const cpu_op_ctx *c)
{
    const cpu_tensor *idx = c->args[0], *src = c->args[1];
    cpu_tensor *y = c->out;
    int64_t rows = y->rank ? y->shape[0] : 0, row = span(y, 1, y->rank);
    if (src->numel != idx->numel * row) {
        cpu_fail(c, "scatter_add: src size does not fit the indices");
        return;
    }
    for (int64_t k = 0; k < idx->numel; k++) {
        int32_t v = idx->i[k];
        if (v < 0 || v >= rows) {
            cpu_fail(c, "scatter_add: index %d out of range [0, %lld)", v, (long long)rows);
            return;
        }
    }
    /* A block of result rows at a time (their doubles in about 1 MiB, in
     * cache), the src rows sent to the block in src order (a counting sort
     * of the indices by block): each element's sum is a running one over src
     * from 0.0, as ever, and src is read nearly in order (a convolution's
     * windows of one image land in one block), where one result row at a
     * time read its scattered sources (fashion_cnn's step: 8% in the load
     * misses). A row with no source is 0, one with one is that source plus
     * 0.0: -0 becomes +0, a NaN quiet. */
    const int64_t per = row > 0 && row < SCATTER_BLOCK_ELEMS ? SCATTER_BLOCK_ELEMS / row : 1;
    const int64_t nblocks = rows ? (rows + per - 1) / per : 0;
    int64_t *start = nc_xcalloc((size_t)nblocks + 2, sizeof *start), *order = nc_xmalloc((size_t)(idx->numel + 1) * sizeof *order);
    for (int64_t k = 0; k < idx->numel; k++) start[idx->i[k] / per + 2]++;
    for (int64_t b = 0; b < nblocks; b++) start[b + 2] += start[b + 1];
    for (int64_t k = 0; k < idx->numel; k++) order[start[idx->i[k] / per + 1]++] = k;   /* start[b + 1]: block b's end */
    double *acc = nc_xmalloc((size_t)(per * row > 0 ? per * row : 1) * sizeof *acc);
    for (int64_t b = 0; b < nblocks; b++) {
        const int64_t v0 = b * per, n = (rows - v0 < per ? rows - v0 : per) * row;
        for (int64_t j = 0; j < n; j++) acc[j] = 0;
        for (int64_t e = start[b]; e < start[b + 1]; e++) {
            const float *s = src->f + order[e] * row;
            double *a = acc + (idx->i[order[e]] - v0) * row;
            for (int64_t j = 0; j < row; j++) a[j] += s[j];
        }
        for (int64_t j = 0; j < n; j++) y->f[v0 * row + j] = (float)acc[j];
    }
    round_out(y);
    free(acc);
    free(order);
    free(start);
}
