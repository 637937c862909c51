/* cuda_emit.c - one CUDA kernel (or library call) per IR node, emitted from
 * the op table's cuda_emit and cuda_expr columns.
 *
 * Kernels share one ABI: a single by-value struct nc_args holding buffer
 * pointers and int64 sizes (dims evaluated at run time). Its last member,
 * step, is no longer read (kept for the layout runtime/gpu.c and the batch
 * tables share): dropout reads the training step from its @step operand, a
 * buffer the run's inputs fill, so a replayed CUDA graph sees each new step.
 * Floats are computed in f32 and stored with round-to-nearest-even; integers
 * in 64 bits and stored saturating, exactly as the CPU executor does. */
#include "cuda_emit.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The conversions the emitters use most: %s %.*s %c %d %u %ld %lu %lld
 * %llu %zu and %%, without flags or widths. cg_printf and cg_snprintf
 * format these themselves: libquadmath, which openblas's libgfortran loads,
 * registers a printf type, and from then on glibc formats every printf of
 * the process on its slow positional path (a sixth of --memory-budget's
 * search went there). The length of the conversion after a '%', 0 for one
 * left to vsnprintf. */
static int simple_conversion(const char *p)
{
    if (p[0] == '.' && p[1] == '*' && p[2] == 's') return 3;
    if (p[0] == 'l' && p[1] == 'l' && (p[2] == 'd' || p[2] == 'u')) return 3;
    if ((p[0] == 'l' || p[0] == 'z') && (p[1] == 'd' || p[1] == 'u') && !(p[0] == 'z' && p[1] == 'd')) return 2;
    return *p == 's' || *p == 'd' || *p == 'u' || *p == 'c' || *p == '%';
}

/* A fixed buffer (cg_snprintf) takes what fits; past that it overflows,
 * and vsnprintf writes it again as snprintf cuts it. */
static void put(cg_buf *b, const char *s, size_t n)
{
    if (b->fixed) {
        if (b->overflow || b->n + n >= b->cap) {
            b->overflow = true;
            return;
        }
    } else if (!b->s || b->n + n >= b->cap) {
        b->cap = (b->cap + n + 1) * 2;
        b->s = nc_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void cg_put(cg_buf *b, const char *s, size_t n)
{
    if (!b->discard) put(b, s, n);
}

static void put_integer(cg_buf *b, unsigned long long magnitude, bool negative)
{
    char digits[24];
    int n = (int)sizeof digits;
    do digits[--n] = (char)('0' + magnitude % 10); while ((magnitude /= 10) != 0);
    if (negative) digits[--n] = '-';
    put(b, digits + n, sizeof digits - (size_t)n);
}

/* %s and %.*s of NULL as glibc writes them */
static void put_string(cg_buf *b, const char *s, int precision)
{
    if (!s) s = precision < 0 || precision >= 6 ? "(null)" : "";
    size_t n = precision < 0 ? strlen(s) : strnlen(s, (size_t)precision);
    put(b, s, n);
}

/* One conversion (simple_conversion says which) of the argument ap holds next. */
static void put_conversion(cg_buf *b, const char *at, va_list *ap)
{
    if (*at == '%') put(b, "%", 1);
    else if (*at == 's') put_string(b, va_arg(*ap, const char *), -1);
    else if (*at == '.') {   /* %.*s */
        int precision = va_arg(*ap, int);
        put_string(b, va_arg(*ap, const char *), precision);
    } else if (*at == 'c') {
        char c = (char)va_arg(*ap, int);
        put(b, &c, 1);
    } else if (*at == 'd') {
        int v = va_arg(*ap, int);
        put_integer(b, v < 0 ? 0ull - (unsigned long long)(long long)v : (unsigned long long)v, v < 0);
    } else if (*at == 'u') {
        put_integer(b, va_arg(*ap, unsigned), false);
    } else if (at[0] == 'l' && at[1] == 'l') {
        if (at[2] == 'd') {
            long long v = va_arg(*ap, long long);
            put_integer(b, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, v < 0);
        } else {
            put_integer(b, va_arg(*ap, unsigned long long), false);
        }
    } else if (at[0] == 'l') {
        if (at[1] == 'd') {
            long v = va_arg(*ap, long);
            put_integer(b, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, v < 0);
        } else {
            put_integer(b, va_arg(*ap, unsigned long), false);
        }
    } else {   /* %zu */
        put_integer(b, va_arg(*ap, size_t), false);
    }
}

/* fmt formatted onto b in one pass, when every conversion is simple; else
 * false with b as it was (what was written taken back). */
static bool simple_printf(cg_buf *b, const char *fmt, va_list *ap)
{
    size_t start = b->n;
    const char *p = fmt;
    for (const char *at = strchr(p, '%'); at; at = strchr(p, '%')) {
        int len = simple_conversion(at + 1);
        if (!len) {
            b->n = start;
            if (b->s) b->s[start] = 0;
            return false;
        }
        put(b, p, (size_t)(at - p));
        put_conversion(b, at + 1, ap);
        p = at + 1 + len;
    }
    put(b, p, strlen(p));
    return true;
}

void cg_printf(cg_buf *b, const char *fmt, ...)
{
    va_list ap;
    if (b->discard) return;
    va_start(ap, fmt);
    bool done = simple_printf(b, fmt, &ap);
    va_end(ap);
    if (done) return;
    for (;;) {
        va_start(ap, fmt);
        int need = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (need < 0) NC_BUG("vsnprintf failed");
        if (b->s && b->n + (size_t)need < b->cap) {
            b->n += (size_t)need;
            return;
        }
        b->cap = (b->cap + (size_t)need + 1) * 2;
        b->s = nc_xrealloc(b->s, b->cap);
        if (b->n == 0) b->s[0] = 0;
    }
}

int cg_snprintf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    cg_buf b = {.s = buf, .cap = cap, .fixed = true};
    if (cap > 0) {
        buf[0] = 0;
        va_start(ap, fmt);
        bool done = simple_printf(&b, fmt, &ap);
        va_end(ap);
        if (done && !b.overflow) return (int)b.n;
    }
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

/* The elementwise expressions and reduction combiners of ops.def. */
static const char *const nc_cuda_exprs[OP_COUNT] = {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, cuda, cexpr, grad, kw, meaning) [e] = cexpr,
#include "ops.def"
#undef X
};

/* ------------------------------------------------------------------ */
/* the prelude every module's source starts with                        */

static const char prelude[] =
    "// Generated by netc. One kernel per op group; each names the IR values\n"
    "// and the .net source lines it implements.\n"
    "struct nc_args { void *buf[" NRT_STR(NRT_MAX_BUFS) "]; long long n[" NRT_STR(NRT_MAX_INTS) "]; unsigned long long step; };  // step: unused\n"
    "struct nc_f16 { unsigned short x; };\n"
    "struct nc_bf16 { unsigned short x; };\n"
    "struct nc_bool { unsigned char x; };\n"
    "#define NC_I64_MIN (-9223372036854775807LL - 1)\n"
    "#define NC_LOG2E 1.44269504f  // e^x = 2^(x NC_LOG2E): nc_exp2 is one instruction\n"
    "#ifndef NC_HOST  // tests/unit/test_kernels_host.c compiles these kernels for the CPU\n"
    "__device__ __forceinline__ float nc_f16_to_f32(unsigned short h) {\n"
    "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "__device__ __forceinline__ unsigned short nc_f32_to_f16(float f) {\n"
    "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "// sm_80 and later round to bf16 in one instruction (two for a pair), as the executor does (a NaN stays a NaN)\n"
    "__device__ __forceinline__ unsigned short nc_f32_to_bf16(float f) {\n"
    "  unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "__device__ __forceinline__ unsigned nc_pack_bf16(float lo, float hi) {\n"
    "  unsigned d; asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(d) : \"f\"(hi), \"f\"(lo)); return d; }\n"
    "__device__ __forceinline__ unsigned nc_pack_f16(float lo, float hi) {\n"
    "  unsigned d; asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(d) : \"f\"(hi), \"f\"(lo)); return d; }\n"
    "#else\n"
    "__device__ __forceinline__ unsigned short nc_f32_to_bf16(float f) {\n"
    "  unsigned u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }\n"
    "__device__ __forceinline__ unsigned nc_pack_bf16(float lo, float hi) { return nc_f32_to_bf16(lo) | (unsigned)nc_f32_to_bf16(hi) << 16; }\n"
    "__device__ __forceinline__ unsigned nc_pack_f16(float lo, float hi) { return nc_f32_to_f16(lo) | (unsigned)nc_f32_to_f16(hi) << 16; }\n"
    "#endif\n"
    "__device__ __forceinline__ float nc_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }\n"
    "__device__ __forceinline__ float nc_round_f16(float v) { return nc_f16_to_f32(nc_f32_to_f16(v)); }\n"
    "__device__ __forceinline__ float nc_round_bf16(float v) { return nc_bf16_to_f32(nc_f32_to_bf16(v)); }\n"
    "// A pair rounds in one cvt: sm_90 runs conversions at a small fraction of a multiply's rate\n"
    "__device__ __forceinline__ void nc_round_pair_bf16(float *t) {\n"
    "  const unsigned p = nc_pack_bf16(t[0], t[1]); t[0] = __uint_as_float(p << 16); t[1] = __uint_as_float(p & 0xffff0000u); }\n"
    "__device__ __forceinline__ void nc_round_pair_f16(float *t) {\n"
    "  const unsigned p = nc_pack_f16(t[0], t[1]); t[0] = nc_f16_to_f32((unsigned short)(p & 0xffffu)); t[1] = nc_f16_to_f32((unsigned short)(p >> 16)); }\n"
    "__device__ __forceinline__ float nc_ld(const float *p, long long i) { return p[i]; }\n"
    "__device__ __forceinline__ float nc_ld(const nc_f16 *p, long long i) { return nc_f16_to_f32(p[i].x); }\n"
    "__device__ __forceinline__ float nc_ld(const nc_bf16 *p, long long i) { return nc_bf16_to_f32(p[i].x); }\n"
    "__device__ __forceinline__ long long nc_ld(const int *p, long long i) { return p[i]; }\n"
    "__device__ __forceinline__ long long nc_ld(const unsigned char *p, long long i) { return p[i]; }\n"
    "__device__ __forceinline__ long long nc_ld(const nc_bool *p, long long i) { return p[i].x; }\n"
    "__device__ __forceinline__ long long nc_sat(double v, double lo, double hi) {\n"
    "  if (v != v) return 0; v = trunc(v); return v <= lo ? (long long)lo : v >= hi ? (long long)hi : (long long)v; }\n"
    "__device__ __forceinline__ void nc_st(float *p, long long i, float v) { p[i] = v; }\n"
    "__device__ __forceinline__ void nc_st(nc_f16 *p, long long i, float v) { p[i].x = nc_f32_to_f16(v); }\n"
    "__device__ __forceinline__ void nc_st(nc_bf16 *p, long long i, float v) { p[i].x = nc_f32_to_bf16(v); }\n"
    "__device__ __forceinline__ void nc_st(int *p, long long i, float v) { p[i] = (int)nc_sat(v, -2147483648.0, 2147483647.0); }\n"
    "__device__ __forceinline__ void nc_st(unsigned char *p, long long i, float v) { p[i] = (unsigned char)nc_sat(v, 0.0, 255.0); }\n"
    "__device__ __forceinline__ void nc_st(nc_bool *p, long long i, float v) { p[i].x = v != 0.0f; }\n"
    "__device__ __forceinline__ void nc_st(float *p, long long i, long long v) { p[i] = (float)v; }\n"
    "__device__ __forceinline__ void nc_st(nc_f16 *p, long long i, long long v) { p[i].x = nc_f32_to_f16((float)v); }\n"
    "__device__ __forceinline__ void nc_st(nc_bf16 *p, long long i, long long v) { p[i].x = nc_f32_to_bf16((float)v); }\n"
    "__device__ __forceinline__ void nc_st(int *p, long long i, long long v) { p[i] = (int)nc_sat((double)v, -2147483648.0, 2147483647.0); }\n"
    "__device__ __forceinline__ void nc_st(unsigned char *p, long long i, long long v) { p[i] = (unsigned char)nc_sat((double)v, 0.0, 255.0); }\n"
    "__device__ __forceinline__ void nc_st(nc_bool *p, long long i, long long v) { p[i].x = v != 0; }\n"
    "template <typename T> __device__ __forceinline__ void nc_st(T *p, long long i, bool v) { nc_st(p, i, (long long)v); }\n"
    "template <typename T> __device__ __forceinline__ void nc_st(T *p, long long i, int v) { nc_st(p, i, (long long)v); }\n"
    "__device__ __forceinline__ float nc_abs(float a) { return fabsf(a); }\n"
    "__device__ __forceinline__ long long nc_abs(long long a) { return a < 0 ? -a : a; }\n"
    "__device__ __forceinline__ float nc_relu(float a) { return a > 0.0f || a != a ? a : 0.0f; }\n"
    "__device__ __forceinline__ long long nc_relu(long long a) { return a > 0 ? a : 0; }\n"
    "__device__ __forceinline__ float nc_max(float a, float b) { return a != a ? a : b != b ? b : a > b ? a : b; }\n"
    "__device__ __forceinline__ float nc_min(float a, float b) { return a != a ? a : b != b ? b : a < b ? a : b; }\n"
    "__device__ __forceinline__ long long nc_max(long long a, long long b) { return a > b ? a : b; }\n"
    "__device__ __forceinline__ long long nc_min(long long a, long long b) { return a < b ? a : b; }\n"
    "// GELU's derivative, Phi(x) + x phi(x), with Phi(x) = erfc(-x / sqrt 2) / 2 (1 + erf loses it below -3).\n"
    "__device__ __forceinline__ float nc_gelu_slope(float a) {\n"
    "  return 0.5f * erfcf(a * -0.70710678118654752f) + a * 0.39894228040143268f * expf(-0.5f * a * a); }\n"
    "__device__ __forceinline__ float nc_div(float a, float b) { return a / b; }\n"
    "__device__ __forceinline__ long long nc_div(long long a, long long b) { return b == 0 ? 0 : a / b; }\n"
    "// Division by a size known at run time (an element's coordinates, a gathered row). A 64-bit\n"
    "// divide is a long instruction sequence per element; for the dividends and divisors under 2^32\n"
    "// that nearly every tensor has, a multiply-high and a shift do it (Granlund and Montgomery,\n"
    "// 'Division by invariant integers using multiplication', the round-up method with a 33-bit\n"
    "// multiplier). Each kernel sets its divisors up once per thread (cuda_emit.c, cg_divisor).\n"
    "struct nc_divisor { long long d; unsigned m, s; };   // s > 32: d too large, divide\n"
    "__device__ __forceinline__ nc_divisor nc_divisor_of(long long d) {\n"
    "  nc_divisor r; r.d = d > 0 ? d : 1; r.m = 0; r.s = 64;   // a size of 0 divides nothing\n"
    "  if (r.d < (1ll << 32)) {\n"
    "    r.s = r.d == 1 ? 0 : 64 - __clzll(r.d - 1);\n"
    "    r.m = (unsigned)(((1ull << 32) * ((1ull << r.s) - (unsigned long long)r.d)) / (unsigned long long)r.d + 1); }\n"
    "  return r; }\n"
    "__device__ __forceinline__ long long nc_divmod(long long n, const nc_divisor &D, long long *rem) {\n"
    "  if (((unsigned long long)n >> 32) == 0 && D.s <= 32) {\n"
    "    const unsigned q = (unsigned)(((unsigned long long)__umulhi((unsigned)n, D.m) + (unsigned long long)n) >> D.s);\n"
    "    *rem = (unsigned)n - q * (unsigned)D.d; return q; }\n"
    "  const long long q = n / D.d; *rem = n - q * D.d; return q; }\n"
    "__device__ __forceinline__ long long nc_quot(long long n, const nc_divisor &D) { long long r; return nc_divmod(n, D, &r); }\n"
    "// Index code names its type nc_ix: a kernel runs it in 32 bits (unsigned) when every index it\n"
    "// computes is below 2^31 (its loop counts and the sizes of what it reads, cg_bound), in 64 bits\n"
    "// otherwise: half the instructions per element where offsets are computed. Below 2^31 the\n"
    "// multiply-high's sum cannot overflow 32 bits.\n"
    "#ifdef NC_WIDE_INDEX  // tests/unit/test_kernels_host.c: the 64-bit path at small sizes\n"
    "#define NC_NARROW 0ll\n"
    "#else\n"
    "#define NC_NARROW (1ll << 31)\n"
    "#endif\n"
    "__device__ __forceinline__ long long nc_capped_product(long long x) { return x < 0 ? (1ll << 31) : x; }\n"
    "template <typename... T> __device__ __forceinline__ long long nc_capped_product(long long x, T... rest) {\n"
    "  const long long p = nc_capped_product(rest...);\n"
    "  return x < 0 || x >= (1ll << 31) || p >= (1ll << 31) ? (1ll << 31) : x * p; }\n"
    "__device__ __forceinline__ unsigned nc_divmod(unsigned n, const nc_divisor &D, unsigned *rem) {\n"
    "  const unsigned q = (__umulhi(n, D.m) + n) >> D.s; *rem = n - q * (unsigned)D.d; return q; }\n"
    "__device__ __forceinline__ unsigned nc_quot(unsigned n, const nc_divisor &D) { unsigned r; return nc_divmod(n, D, &r); }\n"
    "// The counter-based RNG of runtime/cpu_exec.h, bit for bit.\n"
    "__device__ __forceinline__ float nc_rng_uniform(unsigned long long seed, unsigned long long stream, unsigned long long index) {\n"
    "  unsigned long long z = seed * 0x9e3779b97f4a7c15ull ^ (stream + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^ index;\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull; z ^= z >> 31;\n"
    "  return (float)(z >> 40) * (1.0f / 16777216.0f); }\n"
    "__device__ __forceinline__ float nc_dropout(float a, float p, unsigned long long seed, unsigned long long step, long long i) {\n"
    "  return nc_rng_uniform(seed, step, (unsigned long long)i) >= p ? a * (p < 1.0f ? 1.0f / (1.0f - p) : 0.0f) : 0.0f; }\n"
    CUDA_GRID_MACROS
    "// How many threads a step of a batch takes before the next one starts (cuda_batch.c): its\n"
    "// launch's whole blocks of 256 (a thread for each of n[0] elements), at most the batch's grid.\n"
    "__device__ __forceinline__ long long nc_batch_share(long long n, long long vg) {\n"
    "  const long long t = (n + 255) / 256 * 256; return t < vg ? t : vg; }\n"
    "// Eight consecutive elements at once (cuda_fuse.c's vector loops): 16-byte loads and stores\n"
    "// for f16/bf16, two for f32, one 8-byte for bool. The caller checks that the pointers are\n"
    "// 16-byte aligned (the arena's buffers are 256-byte aligned); a GPU faults on one that is not,\n"
    "// which the host shim checks in NC_VECTOR_AT.\n"
    "#ifndef NC_HOST\n"
    "#define NC_VECTOR_AT(p, bytes) ((void)0)\n"
    "#endif\n"
    "__device__ __forceinline__ void nc_ld8(const float *p, long long i, float *v) {\n"
    "  NC_VECTOR_AT(p + i, 16);\n"
    "  const float4 a = *(const float4 *)(p + i), b = *(const float4 *)(p + i + 4);\n"
    "  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w; }\n"
    "// Sixteen bytes as loaded (a row held in registers, cuda_emit.c's emit_row_hold), and the eight\n"
    "// 2-byte elements in them as floats; p names the element type.\n"
    "template <typename T> __device__ __forceinline__ uint4 nc_ld16(const T *p, long long i) {\n"
    "  NC_VECTOR_AT(p + i, 16); return *(const uint4 *)(p + i); }\n"
    "__device__ __forceinline__ void nc_unpack8(const nc_bf16 *, uint4 q, float *v) {\n"
    "  const unsigned w[4] = {q.x, q.y, q.z, q.w};\n"
    "  for (int e = 0; e < 4; e++) { v[2 * e] = nc_bf16_to_f32((unsigned short)(w[e] & 0xffffu)); v[2 * e + 1] = nc_bf16_to_f32((unsigned short)(w[e] >> 16)); } }\n"
    "__device__ __forceinline__ void nc_unpack8(const nc_f16 *, uint4 q, float *v) {\n"
    "  const unsigned w[4] = {q.x, q.y, q.z, q.w};\n"
    "  for (int e = 0; e < 4; e++) { v[2 * e] = nc_f16_to_f32((unsigned short)(w[e] & 0xffffu)); v[2 * e + 1] = nc_f16_to_f32((unsigned short)(w[e] >> 16)); } }\n"
    "__device__ __forceinline__ void nc_ld8(const nc_bf16 *p, long long i, float *v) { nc_unpack8(p, nc_ld16(p, i), v); }\n"
    "__device__ __forceinline__ void nc_ld8(const nc_f16 *p, long long i, float *v) { nc_unpack8(p, nc_ld16(p, i), v); }\n"
    "__device__ __forceinline__ void nc_ld8(const nc_bool *p, long long i, float *v) {\n"
    "  NC_VECTOR_AT(p + i, 8);\n"
    "  const uint2 q = *(const uint2 *)(p + i);\n"
    "  for (int e = 0; e < 4; e++) { v[e] = (float)(q.x >> (8 * e) & 0xffu); v[4 + e] = (float)(q.y >> (8 * e) & 0xffu); } }\n"
    "__device__ __forceinline__ void nc_ld8(const unsigned char *p, long long i, float *v) { nc_ld8((const nc_bool *)p, i, v); }\n"
    "__device__ __forceinline__ void nc_st8(float *p, long long i, const float *v) {\n"
    "  float4 a, b; a.x = v[0]; a.y = v[1]; a.z = v[2]; a.w = v[3]; b.x = v[4]; b.y = v[5]; b.z = v[6]; b.w = v[7];\n"
    "  NC_VECTOR_AT(p + i, 16); *(float4 *)(p + i) = a; *(float4 *)(p + i + 4) = b; }\n"
    "__device__ __forceinline__ void nc_st8(nc_bf16 *p, long long i, const float *v) {\n"
    "  uint4 q; q.x = nc_pack_bf16(v[0], v[1]); q.y = nc_pack_bf16(v[2], v[3]); q.z = nc_pack_bf16(v[4], v[5]); q.w = nc_pack_bf16(v[6], v[7]);\n"
    "  NC_VECTOR_AT(p + i, 16); *(uint4 *)(p + i) = q; }\n"
    "// v already rounded to bf16: a pair packs with one byte permute, no conversion\n"
    "__device__ __forceinline__ unsigned nc_pack_rounded_bf16(float lo, float hi) { return __float_as_uint(lo) >> 16 | (__float_as_uint(hi) & 0xffff0000u); }\n"
    "__device__ __forceinline__ void nc_st8_rounded(nc_bf16 *p, long long i, const float *v) {\n"
    "  uint4 q; q.x = nc_pack_rounded_bf16(v[0], v[1]); q.y = nc_pack_rounded_bf16(v[2], v[3]);\n"
    "  q.z = nc_pack_rounded_bf16(v[4], v[5]); q.w = nc_pack_rounded_bf16(v[6], v[7]);\n"
    "  NC_VECTOR_AT(p + i, 16); *(uint4 *)(p + i) = q; }\n"
    "__device__ __forceinline__ void nc_st8(nc_f16 *p, long long i, const float *v) {\n"
    "  uint4 q; q.x = nc_pack_f16(v[0], v[1]); q.y = nc_pack_f16(v[2], v[3]); q.z = nc_pack_f16(v[4], v[5]); q.w = nc_pack_f16(v[6], v[7]);\n"
    "  NC_VECTOR_AT(p + i, 16); *(uint4 *)(p + i) = q; }\n"
    "__device__ __forceinline__ void nc_st8(nc_bool *p, long long i, const float *v) {\n"
    "  uint2 q; q.x = 0; q.y = 0;\n"
    "  for (int e = 0; e < 4; e++) { q.x |= (unsigned)(v[e] != 0.0f) << (8 * e); q.y |= (unsigned)(v[4 + e] != 0.0f) << (8 * e); }\n"
    "  NC_VECTOR_AT(p + i, 8); *(uint2 *)(p + i) = q; }\n"
    "__device__ __forceinline__ float nc_add(float a, float b) { return a + b; }\n"
    "#ifndef NC_HOST  // the host shim computes mma.sync, ldmatrix and cp.async lane by lane\n"
    "// D += A B for one warp, m16n8k16: A 4 registers of 2 values, B 2, D 4 floats (PTX fragment layouts).\n"
    "__device__ __forceinline__ void nc_mma_bf16(float *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
    "    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "__device__ __forceinline__ void nc_mma_f16(float *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
    "    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "// Attention's shared-memory tiles (compiler/cuda_attention.c): 16 bytes from global to shared\n"
    "// memory without registers (zeros when !ok; nc_cp_wait waits for this thread's copies), and\n"
    "// four 8x8 matrices of 16-bit values an ldmatrix, lane l giving the address of row l % 8 of matrix l / 8.\n"
    "__device__ __forceinline__ unsigned nc_smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n"
    "__device__ __forceinline__ void nc_cp16(unsigned *dst, const void *src, bool ok) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(nc_smem(dst)), \"l\"(src), \"r\"(ok ? 16 : 0) : \"memory\"); }\n"
    "__device__ __forceinline__ void nc_cp_wait(void) { asm volatile(\"cp.async.wait_all;\" ::: \"memory\"); }\n"
    "// 2^x, flushing results below 2^-126 to zero (probabilities that small do not count)\n"
    "__device__ __forceinline__ float nc_exp2(float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x)); return y; }\n"
    "__device__ __forceinline__ void nc_ldsm4(unsigned *r, const unsigned *p) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\"\n"
    "    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(nc_smem(p)) : \"memory\"); }\n"
    "__device__ __forceinline__ void nc_ldsm4_t(unsigned *r, const unsigned *p) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\"\n"
    "    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(nc_smem(p)) : \"memory\"); }\n"
    "#endif\n"
    "// Hopper's warpgroup products, wgmma (sm_90a images only; the host shim with NC_HOST_WGMMA):\n"
    "// attention's heads of 64 and 128 (compiler/cuda_attention.c). The four warps of a block\n"
    "// multiply their 64 rows at once, A in registers (mma.sync's fragments, warp w holding rows\n"
    "// 16 w..), B a tile of 64 rows in shared memory, each 64 columns of it 128 bytes a row with\n"
    "// the 128-byte swizzle (16-byte piece p of row r at p ^ (r % 8), 1024-byte aligned; a tile\n"
    "// of 128 columns is two such halves, 8 KiB apart), D 32 or 64 floats a thread (mma.sync's\n"
    "// m16n8 accumulators side by side). B is the tile's rows transposed (K-major: the scores,\n"
    "// n64) or the tile itself (N-major: P V, n64 or n128).\n"
    "#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(NC_HOST_WGMMA)\n"
    "#define NC_WGMMA 1\n"
    "#else\n"
    "#define NC_WGMMA 0\n"
    "#endif\n"
    "#if NC_WGMMA && !defined(NC_HOST)\n"
    "#define NC_ACC4(i) \"+f\"(d[i]), \"+f\"(d[i + 1]), \"+f\"(d[i + 2]), \"+f\"(d[i + 3])\n"
    "#define NC_ACC32 NC_ACC4(0), NC_ACC4(4), NC_ACC4(8), NC_ACC4(12), NC_ACC4(16), NC_ACC4(20), NC_ACC4(24), NC_ACC4(28)\n"
    "#define NC_WG_D \"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}\"\n"
    "#define NC_ACC64 NC_ACC32, NC_ACC4(32), NC_ACC4(36), NC_ACC4(40), NC_ACC4(44), NC_ACC4(48), NC_ACC4(52), NC_ACC4(56), NC_ACC4(60)\n"
    "#define NC_WG_D64 \"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}\"\n"
    "// SBO (bits 32-45): 8 rows of 128 bytes; bit 62: the 128-byte swizzle. LBO (bits 16-29) is\n"
    "// unused by a K-major tile and by an N-major one of 64 columns; for 128 columns (wide) it is\n"
    "// the distance between the halves.\n"
    "__device__ __forceinline__ unsigned long long nc_wg_desc_lbo(const void *p, unsigned long long lbo) {\n"
    "  return (unsigned long long)((nc_smem(p) & 0x3FFFFu) >> 4) | (lbo >> 4) << 16 | (1024ull >> 4) << 32 | 1ull << 62; }\n"
    "__device__ __forceinline__ unsigned long long nc_wg_desc(const void *p) { return nc_wg_desc_lbo(p, 16); }\n"
    "__device__ __forceinline__ unsigned long long nc_wg_desc_wide(const void *p) { return nc_wg_desc_lbo(p, 8192); }\n"
    "#define NC_WGMMA_FN(name, ty, trans)                                                                   \\\n"
    "  __device__ __forceinline__ void name(float *d, const unsigned *a, unsigned long long desc, int acc) {  \\\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %37, 0;\\n\"                                              \\\n"
    "                 \"wgmma.mma_async.sync.aligned.m64n64k16.f32.\" ty \".\" ty \" \" NC_WG_D                    \\\n"
    "                 \", {%32, %33, %34, %35}, %36, p, 1, 1, \" trans \";\\n}\\n\"                              \\\n"
    "                 : NC_ACC32 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc), \"r\"(acc) : \"memory\"); }\n"
    "NC_WGMMA_FN(nc_wgmma_bf16_k, \"bf16\", \"0\")\n"
    "NC_WGMMA_FN(nc_wgmma_bf16_n, \"bf16\", \"1\")\n"
    "NC_WGMMA_FN(nc_wgmma_f16_k, \"f16\", \"0\")\n"
    "NC_WGMMA_FN(nc_wgmma_f16_n, \"f16\", \"1\")\n"
    "#define NC_WGMMA_FN128(name, ty)                                                                       \\\n"
    "  __device__ __forceinline__ void name(float *d, const unsigned *a, unsigned long long desc, int acc) {  \\\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %69, 0;\\n\"                                              \\\n"
    "                 \"wgmma.mma_async.sync.aligned.m64n128k16.f32.\" ty \".\" ty \" \" NC_WG_D64                  \\\n"
    "                 \", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\\n}\\n\"                                    \\\n"
    "                 : NC_ACC64 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc), \"r\"(acc) : \"memory\"); }\n"
    "NC_WGMMA_FN128(nc_wgmma_bf16_n128, \"bf16\")\n"
    "NC_WGMMA_FN128(nc_wgmma_f16_n128, \"f16\")\n"
    "// Registers written before a product must be fenced (wgmma.fence); nc_wg_hold pins their\n"
    "// writes before the fence. A product's results are there after nc_wg_wait (32 floats a\n"
    "// call: twice for 64).\n"
    "__device__ __forceinline__ void nc_wg_hold(unsigned *r, int n) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < n; i++) asm volatile(\"\" : \"+r\"(r[i]) :: \"memory\"); }\n"
    "__device__ __forceinline__ void nc_wg_hold_acc(float *d) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 32; i++) asm volatile(\"\" : \"+f\"(d[i]) :: \"memory\"); }\n"
    "__device__ __forceinline__ void nc_wg_fence(void) { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void nc_wg_commit(void) { asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void nc_wg_wait(float *d) { asm volatile(\"wgmma.wait_group.sync.aligned 0;\" : NC_ACC32 :: \"memory\"); }\n"
    "// cp.async writes shared memory through the generic proxy, wgmma reads it through the async one\n"
    "__device__ __forceinline__ void nc_proxy_fence(void) { asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\"); }\n"
    "// the swizzle is of address bits: a tile off its 1024-byte boundary would be read scrambled\n"
    "__device__ __forceinline__ void nc_wg_check_aligned(const void *p) { if (nc_smem(p) & 1023u) __trap(); }\n"
    "#endif\n"
    "// GELU's tanh form as x sigmoid(2 u), u = sqrt(2/pi) (x + 0.044715 x^3): the same function, but\n"
    "// 1 + tanh(u) loses every digit where tanh(u) nears -1 (x below -3) and the sigmoid keeps them.\n"
    "// e^-2u as one ex2 and the quotient as a reciprocal and a product, each within 2 ulp: with expf\n"
    "// and an IEEE division a GELU took 41 instructions an element, more than a bf16 chain has time\n"
    "// for at the copy rate. Past 2^126 the divisor makes the quotient 0 (the result is below 1e-37).\n"
    "// -2u log2(e) = a (k + k 0.044715 a^2): a product, a multiply-add and a product.\n"
    "__device__ __forceinline__ float nc_sigmoid_2u(float a) {\n"
    "  const float k = -1.5957691216057307f * NC_LOG2E;\n"
    "  return __fdividef(1.0f, 1.0f + nc_exp2(a * (k + k * 0.044715f * (a * a)))); }\n"
    "__device__ __forceinline__ float nc_gelu_tanh(float a) { return a * nc_sigmoid_2u(a); }\n"
    "// Its derivative: s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 0.044715 x^2), s = sigmoid(2 u).\n"
    "__device__ __forceinline__ float nc_gelu_tanh_slope(float a) {\n"
    "  const float s = nc_sigmoid_2u(a);\n"
    "  return s + 2.0f * a * s * (1.0f - s) * 0.79788456080286536f * (1.0f + 0.134145f * a * a); }\n"
    "// Programmatic dependent launch (NETC_PDL, sm_90 on): a kernel may start while the one before\n"
    "// it in its stream ends. Every kernel first waits for that one's work to be done and visible\n"
    "// (before it reads or writes anything), then lets the next one start launching.\n"
    "#if !defined(NC_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
    "#define NC_PDL_ENTER() asm volatile(\"griddepcontrol.wait;\\n\\tgriddepcontrol.launch_dependents;\" ::: \"memory\")\n"
    "#elif !defined(NC_HOST)\n"
    "#define NC_PDL_ENTER() ((void)0)\n"
    "#endif\n"
    "// A lane's value from the lane `mask` away in its warp (xor). Only in NC_WARP_STRIDE loops, where\n"
    "// every lane of a warp takes each pass, so a batch (cuda_batch.c) may run it too.\n"
    "#define NC_LANE ((int)(threadIdx.x & 31u))\n"
    "__device__ __forceinline__ float nc_lane_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }\n"
    "__device__ __forceinline__ float nc_warp_sum(float v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }\n"
    "__device__ __forceinline__ float nc_warp_max(float v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v = nc_max(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }\n"
    "// Block-wide reductions for 256..1024-thread blocks; every thread gets the result.\n"
    "__device__ float nc_block_sum(float v) {\n"
    "  __shared__ float s[32]; v = nc_warp_sum(v); int w = threadIdx.x >> 5, l = threadIdx.x & 31;\n"
    "  __syncthreads(); if (l == 0) s[w] = v; __syncthreads();\n"
    "  v = threadIdx.x < (blockDim.x >> 5) ? s[threadIdx.x] : 0.0f; if (w == 0) v = nc_warp_sum(v);\n"
    "  if (threadIdx.x == 0) s[0] = v; __syncthreads(); return s[0]; }\n"
    "__device__ float nc_block_max(float v) {\n"
    "  __shared__ float s[32]; v = nc_warp_max(v); int w = threadIdx.x >> 5, l = threadIdx.x & 31;\n"
    "  __syncthreads(); if (l == 0) s[w] = v; __syncthreads();\n"
    "  v = threadIdx.x < (blockDim.x >> 5) ? s[threadIdx.x] : -__int_as_float(0x7f800000); if (w == 0) v = nc_warp_max(v);\n"
    "  if (threadIdx.x == 0) s[0] = v; __syncthreads(); return s[0]; }\n"
    "\n";

/* ------------------------------------------------------------------ */
/* helpers                                                              */

static const char *storage_type(nc_dtype t)
{
    static const char *names[] = {[NC_F32] = "float", [NC_F16] = "nc_f16", [NC_BF16] = "nc_bf16",
                                  [NC_I32] = "int", [NC_U8] = "unsigned char", [NC_BOOL] = "nc_bool"};
    return names[t];
}

/* The literals written last, by their double's bits: a program writes the
 * same few constants in many kernels, and --memory-budget compiles the
 * program hundreds of times; %.9g goes through glibc's slow printf path
 * (cg_printf). One table a thread: sessions compile on several at once. */
enum { FLIT_MEMO = 64 };
typedef struct flit_memo {
    uint64_t bits;
    bool set;
    char text[48];
} flit_memo;

static _Thread_local flit_memo flit_memos[FLIT_MEMO];

/* A float as a C literal that reads well: 255.0f, 1e-05f, 0.125f. */
static const char *flit(char buf[48], double v)
{
    if (isnan(v)) return "__int_as_float(0x7fc00000)";
    if (isinf(v)) return v < 0 ? "(-__int_as_float(0x7f800000))" : "__int_as_float(0x7f800000)";
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    flit_memo *m = &flit_memos[(bits ^ bits >> 23 ^ bits >> 47) % FLIT_MEMO];
    if (!m->set || m->bits != bits) {
        char tmp[40];
        snprintf(tmp, sizeof tmp, "%.9g", v);
        cg_snprintf(m->text, sizeof m->text, "%s%sf", tmp, strpbrk(tmp, ".e") ? "" : ".0");
        m->bits = bits, m->set = true;
    }
    memcpy(buf, m->text, sizeof m->text);
    return buf;
}

static const char *compute_type(nc_dtype t) { return dtype_is_float(t) ? "float" : "long long"; }

static const ir_node *node(cg_ctx *cg, ir_value v) { return &cg->g->nodes[v]; }
static ir_value arg(cg_ctx *cg, ir_value v, int i) { return ir_args(cg->g, node(cg, v))[i]; }

/* The dim id of the product of a node's dims from axis `from` on. */
static bool span_dim(cg_ctx *cg, const ir_node *n, int from, uint32_t *out)
{
    dim_expr p = dim_const(1);
    for (int i = from; i < n->rank; i++)
        if (dim_mul(&p, &cg->g->dims[n->shape[i]], &p) != DIM_OK) {
            snprintf(cg->err, sizeof cg->err, "element count of a tensor is too complex to express");
            return false;
        }
    *out = ir_dim_intern((ir_graph *)cg->g, &p);
    return true;
}

/* The dim id of a node's element count. */
static bool numel_dim(cg_ctx *cg, const ir_node *n, uint32_t *out) { return span_dim(cg, n, 0, out); }

static nrt_step *new_step(cg_ctx *cg, nrt_step_kind kind, ir_value v)
{
    nrt_program *p = cg->prog;
    if (p->nsteps == p->cap_steps) {
        p->cap_steps = p->cap_steps ? p->cap_steps * 2 : 64;
        p->steps = nc_xrealloc(p->steps, p->cap_steps * sizeof *p->steps);
    }
    nrt_step *s = &p->steps[p->nsteps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->node = v;
    return s;
}

static void add_buf(nrt_step *s, uint32_t b)
{
    NC_ASSERT(s->nbufs < NRT_MAX_BUFS);
    s->bufs[s->nbufs++] = b;
}

static void add_int(nrt_step *s, uint32_t dim)
{
    NC_ASSERT(s->nints < NRT_MAX_INTS);
    s->ints[s->nints++] = dim;
}

static void add_shape(nrt_step *s, const ir_node *n)
{
    for (int i = 0; i < n->rank; i++) add_int(s, n->shape[i]);
}

static uint32_t new_temp(cg_ctx *cg, uint32_t numel, nc_dtype t)
{
    nrt_program *p = cg->prog;
    p->temps = nc_xrealloc(p->temps, (p->ntemps + 1) * sizeof *p->temps);
    p->temps[p->ntemps] = (nrt_temp){.numel = numel, .dtype = t};
    return cg->g->nnodes + p->ntemps++;
}

/* Start a kernel: a comment naming the IR value and source line, then the
 * body. Bodies are collected apart and deduplicated at end_kernel: the twelve
 * layers of a transformer share one kernel per op, not twelve. */
static nrt_step *begin_kernel(cg_ctx *cg, ir_value v, const char *suffix, nrt_grid grid)
{
    const ir_node *n = node(cg, v);
    const ir_graph *g = cg->g;
    cg_snprintf(cg->cur_name, sizeof cg->cur_name, "k%u_%s%s", v, nc_ops[n->op].name, suffix);
    nrt_step *s = new_step(cg, NRT_STEP_KERNEL, v);
    cg->cur_step = (uint32_t)(s - cg->prog->steps);
    s->grid = grid;
    char *type = ir_shape_str(g, n->dtype, n->rank, n->shape);
    cg->cur_comment.n = 0;
    cg_printf(&cg->cur_comment, "// %%%u = %s", v, nc_ops[n->op].name);
    for (int i = 0; i < n->nargs; i++) cg_printf(&cg->cur_comment, "%s%%%u", i ? ", " : " ", ir_args(g, n)[i]);
    cg_printf(&cg->cur_comment, " : %s", type);
    free(type);
    if (n->loc.file && n->loc.file <= g->nfiles) {
        const char *path = g->files[n->loc.file - 1], *slash = strrchr(path, '/');
        cg_printf(&cg->cur_comment, "    (%s:%u)", slash ? slash + 1 : path, n->loc.line);
    }
    cg->body.n = 0;
    cg->ndivisors = cg->nbounds = 0;
    cg->bounds_lost = false;
    cg->cur_bounds[0] = 0;
    /* more than 64 registers a thread and a 1024-thread launch fails */
    if (grid == NRT_GRID_SINGLE) cg_snprintf(cg->cur_bounds, sizeof cg->cur_bounds, "__launch_bounds__(1024, 1) ");
    cg_printf(&cg->body, CUDA_BODY_HEADER);
    return s;
}

void cg_divisor(cg_ctx *cg, const char *size, char *name, size_t cap)
{
    int k = 0;
    while (k < cg->ndivisors && strcmp(cg->divisors[k], size) != 0) k++;
    if (k == cg->ndivisors && (k == CG_MAX_DIVISORS || strlen(size) >= CG_DIVISOR_LEN)) {
        cg_snprintf(name, cap, "nc_divisor_of(%s)", size);
        return;
    }
    if (k == cg->ndivisors) cg_snprintf(cg->divisors[cg->ndivisors++], CG_DIVISOR_LEN, "%s", size);
    cg_snprintf(name, cap, "d%d", k);
}

void cg_bound(cg_ctx *cg, const char *numel)
{
    if (strcmp(numel, "A.n[0]") == 0) return;   /* always checked */
    for (int k = 0; k < cg->nbounds; k++)
        if (strcmp(cg->bounds[k], numel) == 0) return;
    if (cg->nbounds == CG_MAX_BOUNDS || strlen(numel) >= CG_DIVISOR_LEN) cg->bounds_lost = true;
    else cg_snprintf(cg->bounds[cg->nbounds++], CG_DIVISOR_LEN, "%s", numel);
}

/* The kernel's divisors go first in its body, after the opening line that
 * begin_kernel wrote: loop-invariant set-ups the compiler would otherwise
 * repeat per element (a divide may fault, so it is not hoisted for us).
 * Then, if its index code names nc_ix, the rest of the body twice: with
 * 32-bit indices where its bounds allow, with 64-bit ones otherwise. A
 * body with shared memory (which would be allocated twice) or with a lost
 * bound keeps the 64-bit one. */
static void finish_index_code(cg_ctx *cg)
{
    bool generic = strstr(cg->body.s, "nc_ix") != NULL;
    if (!cg->ndivisors && !generic) return;
    const char *open = strchr(cg->body.s, '\n');
    NC_ASSERT(open);
    size_t head = (size_t)(open + 1 - cg->body.s), end = cg->body.n;
    while (end > head && cg->body.s[end - 1] != '}') end--;   /* the body's closing brace */
    NC_ASSERT(end > head);
    const char *rest = cg->body.s + head;
    int nrest = (int)(end - 1 - head);
    size_t room = 2 * cg->body.n + 1024;   /* the body twice and the divisors: grown from empty, it was copied a dozen times */
    cg_buf b = {.s = nc_xmalloc(room), .cap = room};
    b.s[0] = 0;
    cg_printf(&b, "%.*s", (int)head, cg->body.s);
    for (int k = 0; k < cg->ndivisors; k++) cg_printf(&b, "  const nc_divisor d%d = nc_divisor_of(%s);\n", k, cg->divisors[k]);
    if (!generic) cg_printf(&b, "%s", rest);
    else if (cg->cost_only) {   /* the key: what the paths are made of, each path's text a function of it */
        cg_printf(&b, "  nc_ix %d", cg->bounds_lost);
        for (int k = 0; k < cg->nbounds; k++) cg_printf(&b, " && %s", cg->bounds[k]);
        cg_printf(&b, ";\n%s", rest);
    } else if (cg->bounds_lost || strstr(rest, "__shared__")) cg_printf(&b, "  typedef long long nc_ix;\n%s", rest);
    else {
        cg_printf(&b, "  if (A.n[0] < NC_NARROW");
        for (int k = 0; k < cg->nbounds; k++) cg_printf(&b, " && %s < NC_NARROW", cg->bounds[k]);
        cg_printf(&b, ") {\n  typedef unsigned nc_ix;\n%.*s  } else {\n  typedef long long nc_ix;\n%.*s  }\n}\n\n", nrest, rest, nrest, rest);
    }
    free(cg->body.s);
    cg->body = b;
}

/* The buffer slots a kernel body may store to. Every kernel reaches its
 * buffers through a cast of A.buf[k]; a cast to a const pointer only reads.
 * Anything else counts as a store, so a form this does not know costs
 * concurrency (launch_dag.c), never a missed dependency. */
static uint64_t body_writes(const char *body)
{
    static const char key[] = "A.buf[";
    uint64_t w = 0;
    for (const char *at = strstr(body, key); at; at = strstr(at + 1, key)) {
        long k = strtol(at + sizeof key - 1, NULL, 10);
        if (k < 0 || k >= NRT_MAX_BUFS) continue;
        const char *q = at;
        while (q > body && q[-1] == ' ') q--;
        bool only_read = false;
        if (q > body && q[-1] == ')') {
            const char *open = q - 1;
            while (open > body && *open != '(') open--;
            only_read = *open == '(' && strncmp(open + 1, "const ", 6) == 0;
        }
        if (!only_read) w |= 1ull << k;
    }
    return w;
}

/* Entries by text; slot holds an entry's index + 1 (0: empty), open
 * addressing by hash, at most half full. */
typedef struct body_fact {
    uint64_t hash;
    char *text;
    size_t len;
    uint64_t writes;      /* body_writes */
    int8_t stride_only;   /* cuda_body_memo_stride */
} body_fact;

struct cuda_body_memo {
    body_fact *e;
    uint32_t n, cap;
    uint32_t *slot;
    uint32_t nslots;      /* a power of two */
};

cuda_body_memo *cuda_body_memo_new(void) { return nc_xcalloc(1, sizeof(cuda_body_memo)); }

void cuda_body_memo_free(cuda_body_memo *m)
{
    if (!m) return;
    for (uint32_t i = 0; i < m->n; i++) free(m->e[i].text);
    free(m->e);
    free(m->slot);
    free(m);
}

/* eight bytes a step: the text is hashed each time a kernel is written */
static uint64_t text_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 29;
}

static void memo_rehash(cuda_body_memo *m)
{
    m->nslots = m->nslots ? 2 * m->nslots : 256;
    free(m->slot);
    m->slot = nc_xcalloc(m->nslots, sizeof *m->slot);
    for (uint32_t i = 0; i < m->n; i++) {
        uint32_t at = (uint32_t)m->e[i].hash & (m->nslots - 1);
        while (m->slot[at]) at = (at + 1) & (m->nslots - 1);
        m->slot[at] = i + 1;
    }
}

static uint64_t body_writes(const char *body);

/* body's entry, made (its stores read off it) when the text is new */
static uint32_t memo_fact(cuda_body_memo *m, const char *body, size_t len)
{
    if (2 * (m->n + 1) > m->nslots) memo_rehash(m);
    uint64_t h = text_hash(body, len);
    uint32_t at = (uint32_t)h & (m->nslots - 1);
    for (; m->slot[at]; at = (at + 1) & (m->nslots - 1)) {
        const body_fact *f = &m->e[m->slot[at] - 1];
        if (f->hash == h && f->len == len && memcmp(f->text, body, len) == 0) return m->slot[at] - 1;
    }
    if (m->n == m->cap) m->cap = m->cap ? 2 * m->cap : 64, m->e = nc_xrealloc(m->e, m->cap * sizeof *m->e);
    char *text = nc_xmalloc(len + 1);
    memcpy(text, body, len + 1);
    m->e[m->n] = (body_fact){h, text, len, body_writes(body), 0};
    m->slot[at] = m->n + 1;
    return m->n++;
}

uint32_t cuda_body_memo_count(const cuda_body_memo *m) { return m->n; }

const char *cuda_body_memo_text(const cuda_body_memo *m, uint32_t i) { return i < m->n ? m->e[i].text : NULL; }

int8_t *cuda_body_memo_stride(const cg_ctx *cg, uint32_t k)
{
    return cg->memo && k < cg->nbodies ? &cg->memo->e[cg->bodies_fact[k]].stride_only : NULL;
}

static void end_kernel(cg_ctx *cg)
{
    cg_printf(&cg->body, "}\n\n");
    finish_index_code(cg);
    nrt_program *p = cg->prog;
    nrt_step *s = &p->steps[cg->cur_step];
    for (uint32_t k = 0; k < cg->nbodies; k++)
        if (strcmp(cg->bodies[k], cg->body.s) == 0) {
            s->kernel = k;
            s->writes = cg->bodies_write[k];
            return;
        }
    if (cg->memo) {
        uint32_t fact = memo_fact(cg->memo, cg->body.s, cg->body.n);
        cg->bodies_fact = nc_xrealloc(cg->bodies_fact, (cg->nbodies + 1) * sizeof *cg->bodies_fact);
        cg->bodies_fact[cg->nbodies] = fact;
        s->writes = cg->memo->e[fact].writes;
    } else {
        s->writes = body_writes(cg->body.s);
    }
    cg->bodies = nc_xrealloc(cg->bodies, (cg->nbodies + 1) * sizeof *cg->bodies);
    cg->bodies_write = nc_xrealloc(cg->bodies_write, (cg->nbodies + 1) * sizeof *cg->bodies_write);
    cg->bodies_write[cg->nbodies] = s->writes;
    cg->bodies[cg->nbodies++] = nc_xstrdup(cg->body.s);
    p->kernel_names = nc_xrealloc(p->kernel_names, (p->nkernels + 1) * sizeof *p->kernel_names);
    p->kernel_names[p->nkernels] = nc_xstrdup(cg->cur_name);
    s->kernel = p->nkernels++;
    cg_printf(&cg->src, "%s\nextern \"C\" __global__ void %s%s" CUDA_BODY_HEADER "  NC_PDL_ENTER();\n%s", cg->cur_comment.s,
              cg->cur_bounds, cg->cur_name, cg->body.s + strlen(CUDA_BODY_HEADER));
}

/* Declare a typed pointer for buffer slot k of dtype t. */
static void decl_ptr(cg_ctx *cg, const char *name, int k, nc_dtype t, bool is_const)
{
    cg_printf(&cg->body, "  %s%s *%s = (%s%s *)A.buf[%d];\n", is_const ? "const " : "", storage_type(t), name,
              is_const ? "const " : "", storage_type(t), k);
}

/* The kernel's divisor for the size in A.n[slot] (cg_divisor). */
static cg_name divisor_slot(cg_ctx *cg, int slot)
{
    cg_name name;
    char size[32];
    cg_snprintf(size, sizeof size, "A.n[%d]", slot);
    cg_divisor(cg, size, name.s, sizeof name.s);
    return name;
}

/* Shape decoding: the kernel reads dims from A.n[first..first+rank). */
static void emit_coords(cg_ctx *cg, const char *index, int first, int rank)
{
    cg_printf(&cg->body, "    nc_ix rem = (nc_ix)(%s), c[%d];\n", index, rank > 0 ? rank : 1);
    for (int k = rank - 1; k > 0; k--) cg_printf(&cg->body, "    rem = nc_divmod(rem, %s, &c[%d]);\n", divisor_slot(cg, first + k).s, k);
    if (rank > 0) cg_printf(&cg->body, "    c[0] = rem;   /* the index is below the element count */\n");
}

/* ------------------------------------------------------------------ */
/* emitters named in ops.def                                            */

static bool cuda_emit_none(cg_ctx *cg, ir_value v)
{
    (void)cg, (void)v;
    return true;
}

/* Substitute operand letters and the dropout placeholders into cuda_expr;
 * step: the C expression (an integer) of the node's step operand, for STEP. */
static void expand_expr(cg_ctx *cg, const ir_node *n, const char *expr, const char *step)
{
    const char *plain = expr;   /* the text since the last placeholder: written in one piece */
    for (const char *p = expr; *p; p++) {
        bool word_start = p == expr || !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') || p[-1] == '_');
        bool seed = word_start && strncmp(p, "SEED", 4) == 0, step_word = word_start && strncmp(p, "STEP", 4) == 0;
        bool param = word_start && !seed && !step_word && *p == 'P' && !(p[1] >= 'a' && p[1] <= 'z');
        if (!seed && !step_word && !param) continue;
        cg_put(&cg->body, plain, (size_t)(p - plain));
        if (seed) { cg_printf(&cg->body, "%lluull", (unsigned long long)n->attr.seed); p += 3; }
        else if (step_word) {   /* the i32's bits as unsigned, as the CPU executor */
            NC_ASSERT(step && ir_step_slot(n) >= 0);
            cg_printf(&cg->body, "(unsigned long long)(unsigned)(%s)", step);
            p += 3;
        }
        else { char b[48]; cg_printf(&cg->body, "%s", flit(b, n->attr.f)); }
        plain = p + 1;
    }
    cg_put(&cg->body, plain, strlen(plain));
}

static bool cuda_emit_elementwise(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel;
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    static const char letters[] = "abc";
    for (int i = 0; i < n->nargs; i++) {
        char name[8];
        cg_snprintf(name, sizeof name, "x%d", i);
        decl_ptr(cg, name, i, node(cg, arg(cg, v, i))->dtype, true);
        add_buf(s, arg(cg, v, i));
    }
    decl_ptr(cg, "y", n->nargs, n->dtype, false);
    add_buf(s, v);
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n");
    for (int i = 0; i < n->nargs; i++)   /* a scalar operand (a random op's step) at its one element */
        cg_printf(&cg->body, "    %s %c = nc_ld(x%d, %s);\n", compute_type(node(cg, arg(cg, v, i))->dtype), letters[i], i,
                  node(cg, arg(cg, v, i))->rank == 0 ? "0" : "i");
    /* Integer arithmetic wraps like the CPU executor's; only casts saturate. */
    bool wrap = !dtype_is_float(n->dtype) && n->dtype != NC_BOOL && n->op != OP_CAST;
    if (wrap) cg_printf(&cg->body, "    y[i] = (%s)(long long)(", storage_type(n->dtype));
    else cg_printf(&cg->body, "    nc_st(y, i, ");
    int step = ir_step_slot(n);
    char step_var[2] = {step >= 0 ? letters[step] : 0, 0};
    expand_expr(cg, n, cuda_expr_of(cg, n), step >= 0 ? step_var : NULL);
    cg_printf(&cg->body, ");\n  }\n");
    end_kernel(cg);
    return true;
}

/* A kernel storing one value in each of v's elements: value, the C
 * expression of it (it may read A.n[1], the launch argument arg when one
 * is given). */
static bool emit_one_value(cg_ctx *cg, ir_value v, const char *value, const uint32_t *arg)
{
    const ir_node *n = node(cg, v);
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel;
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    if (arg) add_int(s, *arg);
    add_buf(s, v);
    decl_ptr(cg, "y", 0, n->dtype, false);
    cg_printf(&cg->body, "  const %s value = %s;\n", dtype_is_float(n->dtype) ? "float" : "long long", value);
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) nc_st(y, i, value);\n");
    end_kernel(cg);
    return true;
}

static bool cuda_emit_fill(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    char b[48];
    if (dtype_is_float(n->dtype)) return emit_one_value(cg, v, flit(b, n->attr.f), NULL);
    cg_snprintf(b, sizeof b, "%lldLL", (long long)n->attr.f);
    return emit_one_value(cg, v, b, NULL);
}

/* The size arrives as a launch argument, evaluated from the bound symbols
 * like every shape: the value is stored, nothing is counted. */
static bool cuda_emit_dim_value(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    /* a float rounded to nearest */
    return emit_one_value(cg, v, dtype_is_float(n->dtype) ? "(float)A.n[1]" : "A.n[1]", &n->attr.lo);
}

static bool cuda_emit_iota(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel;
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    add_shape(s, n);
    add_buf(s, v);
    decl_ptr(cg, "y", 0, n->dtype, false);
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n");
    emit_coords(cg, "i", 1, n->rank);
    cg_printf(&cg->body, "    nc_st(y, i, (long long)c[%d]);\n  }\n", n->attr.axis);
    end_kernel(cg);
    return true;
}

/* out element -> input offset for an input whose dims (aligned to the output
 * rank, 1 where missing) are at A.n[in_first..]. */
static bool cuda_emit_broadcast(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel, one = ir_dim_const((ir_graph *)cg->g, 1);
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    add_shape(s, n);
    for (int k = 0; k < n->rank; k++) add_int(s, k < n->rank - x->rank ? one : x->shape[k - (n->rank - x->rank)]);
    add_buf(s, arg(cg, v, 0));
    add_buf(s, v);
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "y", 1, n->dtype, false);
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n");
    emit_coords(cg, "i", 1, n->rank);
    cg_printf(&cg->body, "    nc_ix off = 0, stride = 1;\n");
    cg_printf(&cg->body, "    for (int k = %d; k >= 0; k--) { const nc_ix d = (nc_ix)A.n[%d + k]; if (d != 1) off += c[k] * stride; stride *= d; }\n",
              n->rank - 1, 1 + n->rank);
    cg_printf(&cg->body, "    y[i] = x[off];\n  }\n");
    end_kernel(cg);
    return true;
}

static bool cuda_emit_copy(cg_ctx *cg, ir_value v)
{
    nrt_step *s = new_step(cg, NRT_STEP_COPY, v);
    uint32_t numel;
    if (!numel_dim(cg, node(cg, v), &numel)) return false;
    add_int(s, numel);
    add_buf(s, arg(cg, v, 0));
    add_buf(s, v);
    return true;
}

/* ---- movement read through chains ----------------------------------
 * A transpose, slice or concat loads its operand through the reshapes,
 * transposes and slices cuda_fuse.c marked as read through (inlined): the
 * element's index is mapped back link by link to an offset in the first
 * value that is in memory, so q = transpose(reshape(slice(qkv))) is one
 * kernel reading qkv, not a slice, then a transpose. */

static bool read_through(const cg_ctx *cg, ir_value w)
{
    const ir_node *n = &cg->g->nodes[w];
    if (cg->out_as && n->nargs && cg->out_as[ir_args(cg->g, n)[0]] == w) return false;   /* attention writes it as it lies */
    return cg->group && cg->inlined[w] && op_is_movement_link(cg->g->nodes[w].op);
}

/* The slot of dim in the step's sizes, added if new. */
static int dim_slot(nrt_step *s, uint32_t dim)
{
    for (int k = 0; k < s->nints; k++)
        if (s->ints[k] == dim) return k;
    add_int(s, dim);
    return s->nints - 1;
}

static bool dim_is_one(const cg_ctx *cg, uint32_t dim)
{
    int64_t len;
    return dim_is_const(&cg->g->dims[dim], &len) && len == 1;
}

/* Registers u's element count as a bound of the kernel's indices (an
 * offset into u stays below it). */
static void bound_numel(cg_ctx *cg, nrt_step *s, const ir_node *u)
{
    if (!u->rank) return;
    char numel[CG_DIVISOR_LEN] = "nc_capped_product(";
    size_t len = strlen(numel);
    for (int k = 0; k < u->rank && len < sizeof numel; k++)
        len += (size_t)cg_snprintf(numel + len, sizeof numel - len, "%sA.n[%d]", k ? ", " : "", dim_slot(s, u->shape[k]));
    if (len + 1 < sizeof numel) {
        strcat(numel, ")");
        cg_bound(cg, numel);
    } else {
        cg->bounds_lost = true;
    }
}

/* A slice link, n = slice(u) along axis a, [outer, len, inner] of
 * [outer, full, inner]: element L of n is element L + (q (full - len) +
 * start) inner of u, q = L / (len inner) the outer coordinate; one division
 * (none when no dim before a is larger than 1). */
static void emit_slice_link(cg_ctx *cg, nrt_step *s, const ir_node *n, const ir_node *u, const char *var)
{
    int a = n->attr.axis;
    bool outer = false;
    char inner[CG_DIVISOR_LEN] = "", len_inner[CG_DIVISOR_LEN];
    for (int k = 0; k < n->rank; k++) {   /* every dim has its slot, as the chain's size budget counts (cuda_fuse.c) */
        int sl = dim_slot(s, n->shape[k]);
        if (k < a) outer |= !dim_is_one(cg, n->shape[k]);
        if (k > a) cg_snprintf(inner + strlen(inner), sizeof inner - strlen(inner), "%sA.n[%d]", inner[0] ? " * " : "", sl);
    }
    if (!inner[0]) cg_snprintf(inner, sizeof inner, "1");
    int len = dim_slot(s, n->shape[a]), full = dim_slot(s, u->shape[a]), start = dim_slot(s, n->attr.lo);
    if (!outer) {
        cg_printf(&cg->body, "    %s += (nc_ix)A.n[%d] * (nc_ix)(%s);\n", var, start, inner);
    } else {
        cg_name d;
        cg_snprintf(len_inner, sizeof len_inner, "A.n[%d] * %s", len, inner);
        cg_divisor(cg, len_inner, d.s, sizeof d.s);
        cg_printf(&cg->body, "    %s += (nc_quot(%s, %s) * (nc_ix)(A.n[%d] - A.n[%d]) + (nc_ix)A.n[%d]) * (nc_ix)(%s);\n", var, var, d.s,
                  full, len, start, inner);
    }
    bound_numel(cg, s, u);
}

/* Rewrites var, an element's linear index in movement op w's result, into
 * the linear index in w's operand. */
static void emit_link(cg_ctx *cg, nrt_step *s, ir_value w, const char *var)
{
    const ir_node *n = node(cg, w), *u = node(cg, arg(cg, w, 0));
    cg_buf *b = &cg->body;
    if (n->op == OP_RESHAPE) return;   /* the same element order */
    if (n->op == OP_SLICE) {
        emit_slice_link(cg, s, n, u, var);
        return;
    }
    cg_printf(b, "    {\n      nc_ix rem = %s, c[%d], uc[%d];\n", var, n->rank ? n->rank : 1, u->rank ? u->rank : 1);
    int top = 0;   /* the outermost dim not of size 1: the index below the element count, it takes the rest */
    while (top < n->rank && dim_is_one(cg, n->shape[top])) top++;
    for (int k = n->rank - 1; k >= 0; k--) {
        if (dim_is_one(cg, n->shape[k])) cg_printf(b, "      c[%d] = 0;\n", k);
        else if (k == top) cg_printf(b, "      c[%d] = rem;\n", k);
        else cg_printf(b, "      rem = nc_divmod(rem, %s, &c[%d]);\n", divisor_slot(cg, dim_slot(s, n->shape[k])).s, k);
    }
    NC_ASSERT(n->op == OP_TRANSPOSE);
    for (int k = 0; k < n->rank; k++) cg_printf(b, "      uc[%d] = c[%d];\n", n->attr.axes[k], k);
    cg_printf(b, "      %s = 0;\n", var);
    for (int k = 0; k < u->rank; k++) cg_printf(b, "      %s = %s * (nc_ix)A.n[%d] + uc[%d];\n", var, var, dim_slot(s, u->shape[k]), k);
    cg_printf(b, "    }\n");
    bound_numel(cg, s, u);
}

/* The value in memory under w's read-through links. */
static ir_value chain_root(const cg_ctx *cg, ir_value w)
{
    while (read_through(cg, w)) w = ir_args(cg->g, &cg->g->nodes[w])[0];
    return w;
}

/* Maps var through w's read-through links (to an index in chain_root(w)). */
static void emit_read_through(cg_ctx *cg, nrt_step *s, ir_value w, const char *var)
{
    for (; read_through(cg, w); w = arg(cg, w, 0)) emit_link(cg, s, w, var);
}

/* A transpose or slice: each element from its operand's root, through v's
 * own map and the operand's links. */
static bool emit_movement(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel;
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    ir_value root = chain_root(cg, arg(cg, v, 0));
    add_buf(s, root);
    add_buf(s, v);
    decl_ptr(cg, "x", 0, node(cg, root)->dtype, true);
    decl_ptr(cg, "y", 1, n->dtype, false);
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n    nc_ix off = (nc_ix)i;\n");
    emit_link(cg, s, v, "off");
    emit_read_through(cg, s, arg(cg, v, 0), "off");
    cg_printf(&cg->body, "    y[i] = x[off];\n  }\n");
    end_kernel(cg);
    return true;
}

static bool cuda_emit_transpose(cg_ctx *cg, ir_value v) { return emit_movement(cg, v); }
static bool cuda_emit_slice(cg_ctx *cg, ir_value v) { return emit_movement(cg, v); }

/* The warps a joined sum gives each output of `count` elements: one warp
 * took ~2.4 ns an element, so a lone 36,864-element sum (a 3x3x64x64 conv
 * weight's squared gradient) held the whole kernel ~90 us on an H100. Up to
 * a block's 8 warps share an output (a power of two, so that they sit in
 * one block), each about JOINED_WARP_ELEMS elements or more; netc inspect
 * counts the serial work each warp is left (inspect.c cost_of).
 *
 * One block an output still left a warp 4,608 of that weight's elements
 * (~11 us), and a part that optimizer.c's partial_sums cannot split (under
 * 65,536 elements, or a size with no divisor from 32 to 1024) all of its
 * elements over 8 warps. A concat whose slowest warp that would save more
 * than a launch (JOINED_LAUNCH_RUN elements of a warp's run, ~4 us) over its
 * bytes' time is spread (joined_spread): its parts get warps for JOINED_SPREAD_WARP_ELEMS
 * elements each, a large one whole blocks of 8 (at most JOINED_MAX_BLOCKS an
 * output); every block stores its output's partial result in a scratch row
 * and a second kernel adds each output's partials in order. A part one
 * block still adds up keeps one partial, which the second kernel copies. */
enum {
    JOINED_WARP_ELEMS = 2048, JOINED_MAX_WARPS = 8, JOINED_SPREAD_WARP_ELEMS = 512, JOINED_MAX_BLOCKS = 1024,
    JOINED_LAUNCH_RUN = 1700,        /* ~4 us, a launch's cost at its upper end, at 2.4 ns an element */
    JOINED_BANDWIDTH_ELEMS = 1740,   /* f32 elements the GPU reads while a warp adds one: 2.4 ns at 2.9 TB/s */
};

int64_t cuda_joined_sum_warps(int64_t count, bool spread)
{
    int64_t per = spread ? JOINED_SPREAD_WARP_ELEMS : JOINED_WARP_ELEMS, k = 1;
    while (k < JOINED_MAX_WARPS && count > k * per) k *= 2;
    if (!spread || count <= k * per) return k;
    int64_t blocks = (count + JOINED_MAX_WARPS * per - 1) / (JOINED_MAX_WARPS * per);
    return JOINED_MAX_WARPS * (blocks < JOINED_MAX_BLOCKS ? blocks : JOINED_MAX_BLOCKS);
}

/* The longest run of elements one warp adds up alone. */
static int64_t joined_run(int64_t count, bool spread)
{
    int64_t k = cuda_joined_sum_warps(count, spread);
    return (count + k - 1) / k;
}

/* How much shorter a concat of sums' slowest warp's run is spread than
 * with one block an output, each at least the kernel's bytes' time. */
static int64_t joined_saving(const int64_t *outputs, const int64_t *counts, int nparts)
{
    int64_t elems = 0, run = 0, spread_run = 0;
    for (int p = 0; p < nparts; p++) {
        elems += outputs[p] * counts[p];
        int64_t r = joined_run(counts[p], false), rs = joined_run(counts[p], true);
        run = r > run ? r : run;
        spread_run = rs > spread_run ? rs : spread_run;
    }
    int64_t bytes_run = elems / JOINED_BANDWIDTH_ELEMS;   /* the kernel's bytes' time, as a warp's run */
    run = run > bytes_run ? run : bytes_run;
    spread_run = spread_run > bytes_run ? spread_run : bytes_run;
    return run - spread_run;
}

/* The part p of a joined concat: its sum, its operand, its outputs and the
 * elements of each. */
static ir_value joined_part(cg_ctx *cg, ir_value v, int p, int64_t *outputs, int64_t *count)
{
    ir_value sum = arg(cg, v, p);
    if (node(cg, sum)->op == OP_RESHAPE) sum = arg(cg, sum, 0);
    const ir_node *x = node(cg, arg(cg, sum, 0));
    int64_t d = 1;
    *outputs = *count = 1;
    for (int k = 0; k < x->rank; k++) {
        dim_is_const(&cg->g->dims[x->shape[k]], &d);
        if (k == x->rank - 1) *count = d;
        else *outputs *= d;
    }
    return sum;
}

static int64_t joined_concat_saving(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    int64_t *outputs = nc_xmalloc((n->nargs + 1) * sizeof *outputs), *counts = nc_xmalloc((n->nargs + 1) * sizeof *counts);
    for (int p = 0; p < n->nargs; p++) joined_part(cg, v, p, &outputs[p], &counts[p]);
    int64_t saving = joined_saving(outputs, counts, n->nargs);
    free(outputs);
    free(counts);
    return saving;
}

/* Whether the concat of sums v is spread: where that saves more than a
 * launch, or saves anything and another concat of sums that the same
 * concat reads (the norm's next level) is spread: the second kernels all
 * wait for that reader and run as one launch (cuda_batch.c), so the one
 * launch pays for both (fashion_resnet's three). */
static bool joined_spread(cg_ctx *cg, ir_value v)
{
    int64_t saving = joined_concat_saving(cg, v);
    if (saving > JOINED_LAUNCH_RUN) return true;
    if (saving <= 0 || cg->readers[v] != 1 || node(cg, cg->reader[v])->op != OP_CONCAT) return false;
    const ir_node *r = node(cg, cg->reader[v]);
    for (int i = 0; i < r->nargs; i++) {
        ir_value c = ir_args(cg->g, r)[i];
        if (c != v && cg->joined_sums[c] && joined_concat_saving(cg, c) > JOINED_LAUNCH_RUN) return true;
    }
    return false;
}

/* The scratch slots of each output of a part of k warps an output: one a block. */
static int64_t joined_slots(int64_t k) { return k > JOINED_MAX_WARPS ? k / JOINED_MAX_WARPS : 1; }

/* Where a part's warps start: a multiple of its warps an output, or of a
 * block's 8 where an output takes whole blocks. */
static int64_t joined_start(int64_t wat, int64_t k)
{
    int64_t align = k < JOINED_MAX_WARPS ? k : JOINED_MAX_WARPS;
    return (wat + align - 1) / align * align;
}

static void emit_lanes_combine(cg_buf *b, const char *acc, const char *combine);

/* The second kernel of a spread concat of sums: output c adds its
 * partials (part[base .. base + np), in the first kernel's block order)
 * lane by lane in order, the lanes meeting by exchanges in a fixed order;
 * one partial is copied. Grid-stride, so it may batch (cuda_batch.c). */
static bool emit_joined_totals(cg_ctx *cg, ir_value v, uint32_t part, int64_t outputs_total)
{
    const ir_node *n = node(cg, v);
    ir_graph *g = (ir_graph *)cg->g;
    nrt_step *s = begin_kernel(cg, v, "_totals", NRT_GRID_ELEMENTS);
    add_int(s, ir_dim_const(g, 32 * outputs_total));
    add_int(s, ir_dim_const(g, outputs_total));
    add_buf(s, part);
    add_buf(s, v);
    cg_buf *b = &cg->body;
    cg_printf(b, "  const float *part = (const float *)A.buf[0];\n");
    decl_ptr(cg, "y", 1, n->dtype, false);
    cg_printf(b, "  NC_WARP_STRIDE(c, A.n[1]) {\n    long long base = 0, np = 1;\n");
    int64_t at = 0, slot = 0, outputs, count;
    for (int p = 0; p < n->nargs; p++) {
        joined_part(cg, v, p, &outputs, &count);
        int64_t nb = joined_slots(cuda_joined_sum_warps(count, true));
        cg_printf(b, "    %sif (c < %lld) base = %lld + (c - %lld) * %lld, np = %lld;\n", p ? "else " : "", (long long)(at + outputs),
                  (long long)slot, (long long)at, (long long)nb, (long long)nb);
        at += outputs;
        slot += outputs * nb;
    }
    cg_printf(b, "    float acc = 0.0f;\n    for (long long q = NC_LANE; q < np; q += 32) acc += part[base + q];\n");
    cg_printf(b, "    if (np > 1) {\n");
    emit_lanes_combine(b, "acc", "a + b");
    cg_printf(b, "    }\n    if (NC_LANE == 0) nc_st(y, c, np > 1 ? acc : part[base]);\n  }\n");
    end_kernel(cg);
    return true;
}

/* A concat of sums (cuda_fuse.c's plan_joined_sums): each output element
 * added up by cuda_joined_sum_warps of its count warps of one block (their partial
 * results combined in a fixed order in shared memory: the same bits every
 * run), the part a warp falls in chosen by its place; each part's operand
 * loaded (or computed, with its prologue) in a scope of its own. A part of
 * k warps an output starts at a multiple of k. Spread (joined_spread): each
 * block's result goes to a scratch slot, emit_joined_totals adds them. */
static bool emit_joined_sums(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v);
    bool spread = joined_spread(cg, v);
    int64_t warps = 0, outputs, count, slots = 0;
    for (int p = 0; p < n->nargs; p++) {
        joined_part(cg, v, p, &outputs, &count);
        int64_t k = cuda_joined_sum_warps(count, spread);
        warps = joined_start(warps, k) + outputs * k;
        slots += outputs * joined_slots(k);
    }
    uint32_t part = spread ? new_temp(cg, ir_dim_const((ir_graph *)cg->g, slots), NC_F32) : 0;
    nrt_step *s = begin_kernel(cg, v, "_sums", NRT_GRID_WARPS);
    add_int(s, ir_dim_const((ir_graph *)cg->g, warps));
    cg_buf *b = &cg->body;
    cg_printf(b, "  const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;\n");
    cg_printf(b, "  const int lane = threadIdx.x & 31;\n  float acc = 0.0f;\n  long long out = -1;   /* the output this warp adds to */\n");
    cg_printf(b, "  int nw = 1, wr = 0;   /* the warps of out, and which of them this is */\n");
    if (spread) cg_printf(b, "  long long slot = 0;   /* where its block's result goes */\n");
    int64_t at = 0, wat = 0, slot = 0;
    for (int p = 0; p < n->nargs; p++) {
        ir_value sum = joined_part(cg, v, p, &outputs, &count);
        ir_value x = arg(cg, sum, 0);
        int64_t k = cuda_joined_sum_warps(count, spread), nb = joined_slots(k);
        wat = joined_start(wat, k);
        cg_printf(b, "  if (w >= %lld && w < %lld) {   /* %%%u: %lld elements an output, %lld warps each */\n", (long long)wat,
                  (long long)(wat + outputs * k), sum, (long long)count, (long long)k);
        uint32_t prologue = cuda_fuse_prologue_group(cg, sum);
        if (prologue) {
            cuda_fuse_prologue_inputs(cg, prologue, s);
        } else {
            decl_ptr(cg, "x", s->nbufs, node(cg, x)->dtype, true);
            add_buf(s, x);
        }
        cg_printf(b, "    nw = %lld, wr = (int)((w - %lld) %% %lld), out = %lld + (w - %lld) / %lld;\n",
                  (long long)(k < JOINED_MAX_WARPS ? k : JOINED_MAX_WARPS), (long long)wat, (long long)k, (long long)at, (long long)wat,
                  (long long)k);
        if (spread && nb > 1)
            cg_printf(b, "    slot = %lld + (out - %lld) * %lld + wr / %d;\n", (long long)slot, (long long)at, (long long)nb, JOINED_MAX_WARPS);
        else if (spread)
            cg_printf(b, "    slot = %lld + (out - %lld);\n", (long long)slot, (long long)at);
        cg_printf(b, "    const long long base = (out - %lld) * %lld;\n", (long long)at, (long long)count);
        cg_printf(b, "#pragma unroll 4\n    for (long long j = wr * 32 + lane; j < %lld; j += %lld) {\n", (long long)count, (long long)(32 * k));
        if (prologue) {
            cg_printf(b, "    float pv;\n    { const long long i = base + j;\n");
            cuda_fuse_prologue_value(cg, prologue);
            cg_printf(b, "    }\n    acc += pv;\n");
        } else {
            cg_printf(b, "    acc += nc_ld(x, base + j);\n");
        }
        cg_printf(b, "    }\n  }\n");
        at += outputs;
        wat += outputs * k;
        slot += outputs * nb;
    }
    cg_printf(b, "  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);\n");
    cg_printf(b, "  __shared__ float warp_acc[8];\n  const int wib = threadIdx.x >> 5;\n");
    cg_printf(b, "  if (lane == 0) warp_acc[wib] = acc;\n  __syncthreads();   /* every thread of the block comes here */\n");
    if (spread) {
        cg_printf(b, "  float *part = (float *)A.buf[%d];\n", s->nbufs);
        add_buf(s, part);
        cg_printf(b, "  if (lane == 0 && out >= 0 && wr %% nw == 0) {\n    float t = warp_acc[wib];\n");
        cg_printf(b, "    for (int q = 1; q < nw; q++) t += warp_acc[wib + q];\n    part[slot] = t;\n  }\n");
        end_kernel(cg);
        return emit_joined_totals(cg, v, part, at);
    }
    decl_ptr(cg, "y", s->nbufs, n->dtype, false);
    add_buf(s, v);
    cg_printf(b, "  if (lane == 0 && out >= 0 && wr == 0) {\n    float t = warp_acc[wib];\n");
    cg_printf(b, "    for (int q = 1; q < nw; q++) t += warp_acc[wib + q];\n    nc_st(y, out, t);\n  }\n");
    end_kernel(cg);
    return true;
}

static bool cuda_emit_concat(cg_ctx *cg, ir_value v)
{
    if (cg->joined_sums && cg->joined_sums[v]) return emit_joined_sums(cg, v);
    const ir_node *n = node(cg, v);
    if (n->nargs > NRT_MAX_BUFS - 1 || n->rank + n->nargs + 1 > NRT_MAX_INTS) {
        int most = NRT_MAX_INTS - 1 - n->rank < NRT_MAX_BUFS - 1 ? NRT_MAX_INTS - 1 - n->rank : NRT_MAX_BUFS - 1;
        snprintf(cg->err, sizeof cg->err, "concat of %d tensors of rank %d: the GPU backend joins at most %d at once",
                 n->nargs, n->rank, most);
        return false;
    }
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel;
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    add_shape(s, n);
    for (int i = 0; i < n->nargs; i++) add_int(s, node(cg, arg(cg, v, i))->shape[n->attr.axis]);
    for (int i = 0; i < n->nargs; i++) {   /* each part loaded through its read-through links */
        char name[8];
        cg_snprintf(name, sizeof name, "x%d", i);
        decl_ptr(cg, name, i, n->dtype, true);
        add_buf(s, chain_root(cg, arg(cg, v, i)));
    }
    decl_ptr(cg, "y", n->nargs, n->dtype, false);
    add_buf(s, v);
    int ax = n->attr.axis, lens = 1 + n->rank;
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n");
    emit_coords(cg, "i", 1, n->rank);
    cg_printf(&cg->body, "    long long pos = c[%d];\n    bool done = false;\n", ax);
    for (int i = 0; i < n->nargs; i++) {
        cg_printf(&cg->body, "    if (!done && pos < A.n[%d]) {\n      c[%d] = (nc_ix)pos;\n      nc_ix off = 0;\n", lens + i, ax);
        cg_printf(&cg->body, "      for (int k = 0; k < %d; k++) off = off * (nc_ix)(k == %d ? A.n[%d] : A.n[1 + k]) + c[k];\n", n->rank,
                  ax, lens + i);
        emit_read_through(cg, s, arg(cg, v, i), "off");
        cg_printf(&cg->body, "      y[i] = x%d[off];\n      done = true;\n    }\n    pos -= A.n[%d];\n", i, lens + i);
    }
    cg_printf(&cg->body, "  }\n");
    end_kernel(cg);
    return true;
}


static bool cuda_emit_gather(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *t = node(cg, arg(cg, v, 0)), *idx = node(cg, arg(cg, v, 1));
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    uint32_t numel, nidx;
    if (!numel_dim(cg, n, &numel) || !numel_dim(cg, idx, &nidx)) return false;
    add_int(s, numel);
    add_int(s, nidx);
    add_int(s, t->shape[0]);
    add_buf(s, arg(cg, v, 0));
    add_buf(s, arg(cg, v, 1));
    add_buf(s, v);
    decl_ptr(cg, "table", 0, t->dtype, true);
    decl_ptr(cg, "idx", 1, NC_I32, true);
    decl_ptr(cg, "y", 2, n->dtype, false);
    cg_printf(&cg->body, "  const long long row = A.n[0] / (A.n[1] > 0 ? A.n[1] : 1);\n  const nc_divisor row_d = nc_divisor_of(row);\n");
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n");
    cg_printf(&cg->body, "    long long col; const long long r = idx[nc_divmod(i, row_d, &col)];\n");
    if (dtype_is_float(n->dtype))
        cg_printf(&cg->body, "    if (r < 0 || r >= A.n[2]) nc_st(y, i, __int_as_float(0x7fc00000)); // out of range: NaN\n"
                            "    else y[i] = table[r * row + col];\n  }\n");
    else
        cg_printf(&cg->body, "    y[i] = r < 0 || r >= A.n[2] ? %s{} : table[r * row + col];\n  }\n", storage_type(n->dtype));
    end_kernel(cg);
    return true;
}

/* The dim of a reduction's partial results, `parts` for each of its
 * outputs (C: the dim of their count); false, with cg->err, on overflow. */
static bool partials_dim(cg_ctx *cg, const ir_node *n, uint32_t C, int64_t parts, uint32_t *out)
{
    dim_expr total, k = dim_const(parts);
    if (dim_mul(&cg->g->dims[C], &k, &total) != DIM_OK) {
        snprintf(cg->err, sizeof cg->err, "%s: the partial results' size overflows", nc_ops[n->op].name);
        return false;
    }
    *out = ir_dim_intern((ir_graph *)cg->g, &total);
    return true;
}

/* A scatter-add adds each row's source rows in the order of their
 * positions, so a training step's embedding gradient has the same bits
 * every run (f32 atomic adds would round in whatever order threads came).
 * The positions are sorted by the row they pick, a counting sort: count
 * each row's positions (_count), scan the counts into where each row's
 * range starts (_scan), put every position into its row's range in any
 * order (_fill), then order each range by position (_rank: a position's
 * place is how many of its range are smaller; a range holds one token's
 * occurrences in a batch). _sum then writes every element of the result
 * from its row's range. A range longer than a chunk (a common token's,
 * hundreds; a byte model's space, thousands) is added a chunk at a time by
 * _chunks and the chunks' sums then by _sum, in order, so no thread adds
 * more than a chunk or a range's chunks one value after another. The
 * scratch is int arrays and SCATTER_CHUNKS rows of chunk sums, not an f32
 * accumulator the size of the result (154 MB for GPT-2's embedding).
 * Out-of-range indices pick no row. */
enum { SCATTER_CHUNKS = 2048 };

/* The chunk's length, the same in every kernel: 64 positions, or more
 * where the indices are so many that the chunks would not fit (a range of
 * L positions takes L / chunk + 1 chunks at most, and only ranges longer
 * than a chunk take any). */
static void emit_scatter_chunk_len(cg_ctx *cg, const char *nidx)
{
    cg_printf(&cg->body, "  const long long per_chunk = 2 * %s / %d + 1 > 64 ? 2 * %s / %d + 1 : 64;\n", nidx, SCATTER_CHUNKS, nidx,
              SCATTER_CHUNKS);
}

/* The scratch: start and end of each row's range (end: counts first, then
 * the fill's cursors), each row's first chunk (-1: none), the positions in
 * their ranges (pos: any order; order: sorted), each chunk's row (and at
 * SCATTER_CHUNKS how many chunks there are), the chunks' sums. */
typedef struct scatter_scratch {
    uint32_t start, end, first_chunk, pos, order, chunk_row, chunk_sum;
} scatter_scratch;

/* A kernel over the indices: ints nidx and the result's rows, buffer 0 the
 * indices. */
static nrt_step *begin_index_kernel(cg_ctx *cg, ir_value v, const char *suffix, uint32_t nidx)
{
    nrt_step *s = begin_kernel(cg, v, suffix, NRT_GRID_ELEMENTS);
    add_int(s, nidx);
    add_int(s, node(cg, v)->shape[0]);
    add_buf(s, arg(cg, v, 0));
    decl_ptr(cg, "idx", 0, NC_I32, true);
    return s;
}

static void emit_scatter_count(cg_ctx *cg, ir_value v, uint32_t nidx, const scatter_scratch *x)
{
    nrt_step *s = begin_kernel(cg, v, "_clear", NRT_GRID_ELEMENTS);
    add_int(s, node(cg, v)->shape[0]);
    add_buf(s, x->end);
    cg_printf(&cg->body, "  int *count = (int *)A.buf[0];\n  NC_GRID_STRIDE(r, A.n[0]) count[r] = 0;\n");
    end_kernel(cg);

    s = begin_index_kernel(cg, v, "_count", nidx);
    add_buf(s, x->end);
    cg_printf(&cg->body, "  int *count = (int *)A.buf[1];\n");
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n    const int r = idx[i];\n"
                         "    if (r >= 0 && r < A.n[1]) atomicAdd(&count[r], 1);\n  }\n");
    end_kernel(cg);
}

/* One block: each thread a run of rows; the runs' position and chunk
 * totals are scanned in shared memory (Hillis and Steele), then each
 * thread sets its rows' starts and first chunks. The counts become the
 * fill's cursors. */
static void emit_scatter_scan(cg_ctx *cg, ir_value v, uint32_t nidx, const scatter_scratch *x)
{
    nrt_step *s = begin_kernel(cg, v, "_scan", NRT_GRID_SINGLE);
    add_int(s, node(cg, v)->shape[0]);
    add_int(s, nidx);
    add_buf(s, x->end);
    add_buf(s, x->start);
    add_buf(s, x->first_chunk);
    add_buf(s, x->chunk_row);
    cg_printf(&cg->body, "  int *count = (int *)A.buf[0], *start = (int *)A.buf[1], *first_chunk = (int *)A.buf[2], "
                         "*chunk_row = (int *)A.buf[3];\n");
    emit_scatter_chunk_len(cg, "A.n[1]");
    cg_printf(&cg->body, "  __shared__ int run_total[1024], run_chunks[1024];\n"
                         "  const long long per = (A.n[0] + blockDim.x - 1) / blockDim.x, r0 = threadIdx.x * per;\n"
                         "  const long long r1 = r0 + per < A.n[0] ? r0 + per : A.n[0];\n"
                         "  int total = 0, chunks = 0;\n"
                         "  for (long long r = r0; r < r1; r++) {\n    const int c = count[r];\n"
                         "    total += c;\n    if (c > per_chunk) chunks += (int)((c + per_chunk - 1) / per_chunk);\n  }\n"
                         "  run_total[threadIdx.x] = total;\n  run_chunks[threadIdx.x] = chunks;\n  __syncthreads();\n");
    cg_printf(&cg->body, "  for (unsigned d = 1; d < blockDim.x; d <<= 1) {\n"
                         "    const int t = threadIdx.x >= d ? run_total[threadIdx.x - d] : 0;\n"
                         "    const int k = threadIdx.x >= d ? run_chunks[threadIdx.x - d] : 0;\n    __syncthreads();\n"
                         "    run_total[threadIdx.x] += t;\n    run_chunks[threadIdx.x] += k;\n    __syncthreads();\n  }\n");
    cg_printf(&cg->body, "  int at = run_total[threadIdx.x] - total, chunk = run_chunks[threadIdx.x] - chunks;\n"
                         "  for (long long r = r0; r < r1; r++) {\n    const int c = count[r];\n"
                         "    start[r] = count[r] = at;\n    at += c;\n"
                         "    first_chunk[r] = c > per_chunk ? chunk : -1;\n"
                         "    for (long long k = 0; c > per_chunk && k < c; k += per_chunk) chunk_row[chunk++] = (int)r;\n  }\n"
                         "  if (threadIdx.x == blockDim.x - 1) chunk_row[%d] = chunk;\n", SCATTER_CHUNKS);
    end_kernel(cg);
}

static void emit_scatter_sort(cg_ctx *cg, ir_value v, uint32_t nidx, const scatter_scratch *x)
{
    nrt_step *s = begin_index_kernel(cg, v, "_fill", nidx);
    add_buf(s, x->end);
    add_buf(s, x->pos);
    cg_printf(&cg->body, "  int *cursor = (int *)A.buf[1], *pos = (int *)A.buf[2];\n");
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n    const int r = idx[i];\n"
                         "    if (r >= 0 && r < A.n[1]) pos[atomicAdd(&cursor[r], 1)] = (int)i;\n  }\n");
    end_kernel(cg);

    s = begin_index_kernel(cg, v, "_rank", nidx);
    add_buf(s, x->start);
    add_buf(s, x->end);
    add_buf(s, x->pos);
    add_buf(s, x->order);
    cg_printf(&cg->body, "  const int *start = (const int *)A.buf[1], *end = (const int *)A.buf[2], *pos = (const int *)A.buf[3];\n"
                         "  int *order = (int *)A.buf[4];\n");
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n    const int r = idx[i];\n    if (r < 0 || r >= A.n[1]) continue;\n"
                         "    int at = start[r];\n    for (int k = start[r]; k < end[r]; k++) at += pos[k] < (int)i;\n"
                         "    order[at] = (int)i;\n  }\n");
    end_kernel(cg);
}

/* `total` = the values x[at(k) * row + col] for k in [k0, k1) (at_fmt
 * writes at(k) from k; lines indented by `in`), added in that order as four
 * chains side by side (term k to chain k % 4, the chains then added
 * pairwise): a long range does not wait on each load in turn. */
static void emit_ordered_sum(cg_ctx *cg, const char *in, const char *x, const char *at_fmt)
{
    static const char *const ks[] = {"k", "k + 1", "k + 2", "k + 3"};
    char at[4][64];
    for (int j = 0; j < 4; j++) cg_snprintf(at[j], sizeof at[j], at_fmt, ks[j]);
    cg_printf(&cg->body, "%sfloat s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;\n%slong long k = k0;\n%sfor (; k + 4 <= k1; k += 4) {\n", in,
              in, in);
    for (int j = 0; j < 4; j++) cg_printf(&cg->body, "%s  s%d += nc_ld(%s, %s * row + col);\n", in, j, x, at[j]);
    cg_printf(&cg->body, "%s}\n", in);
    for (int j = 0; j < 3; j++) cg_printf(&cg->body, "%sif (k + %d < k1) s%d += nc_ld(%s, %s * row + col);\n", in, j, j, x, at[j]);
    cg_printf(&cg->body, "%sconst float total = (s0 + s1) + (s2 + s3);\n", in);
}

static void emit_row_len(cg_ctx *cg)
{
    cg_printf(&cg->body, "  const long long row = A.n[0] / (A.n[1] > 0 ? A.n[1] : 1);\n  const nc_divisor row_d = nc_divisor_of(row);\n");
}

/* Each chunk's sum, for the ranges longer than a chunk: ints the chunk
 * sums' size (SCATTER_CHUNKS rows) and their count, nidx. */
static void emit_scatter_chunks(cg_ctx *cg, ir_value v, uint32_t nidx, uint32_t chunks_numel, const scatter_scratch *x)
{
    nrt_step *s = begin_kernel(cg, v, "_chunks", NRT_GRID_ELEMENTS);
    add_int(s, chunks_numel);
    add_int(s, ir_dim_const((ir_graph *)cg->g, SCATTER_CHUNKS));
    add_int(s, nidx);
    add_buf(s, x->start);
    add_buf(s, x->end);
    add_buf(s, x->first_chunk);
    add_buf(s, x->chunk_row);
    add_buf(s, x->order);
    add_buf(s, arg(cg, v, 1));
    add_buf(s, x->chunk_sum);
    cg_printf(&cg->body, "  const int *start = (const int *)A.buf[0], *end = (const int *)A.buf[1], *first_chunk = (const int *)A.buf[2];\n"
                         "  const int *chunk_row = (const int *)A.buf[3], *order = (const int *)A.buf[4];\n");
    decl_ptr(cg, "src", 5, node(cg, arg(cg, v, 1))->dtype, true);
    cg_printf(&cg->body, "  float *chunk_sum = (float *)A.buf[6];\n");
    emit_scatter_chunk_len(cg, "A.n[2]");
    emit_row_len(cg);
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, chunk_row[A.n[1]] * row) {\n    long long col; const long long c = nc_divmod(i, row_d, &col);\n"
                         "    const int r = chunk_row[c];\n    const long long k0 = start[r] + (c - first_chunk[r]) * per_chunk;\n"
                         "    const long long k1 = k0 + per_chunk < end[r] ? k0 + per_chunk : end[r];\n");
    emit_ordered_sum(cg, "    ", "src", "(long long)order[%s]");
    cg_printf(&cg->body, "    chunk_sum[i] = total;\n  }\n");
    end_kernel(cg);
}

/* Every element of the result: its row's range added in order, or its
 * chunks' sums, rounded to the result's dtype; or, where the result is only
 * widened and added to an f32 value (cg->sum_into), that sum, stored
 * instead. */
static void emit_scatter_sum(cg_ctx *cg, ir_value v, uint32_t numel, uint32_t nidx, const scatter_scratch *x)
{
    const ir_node *n = node(cg, v), *src = node(cg, arg(cg, v, 1));
    ir_value sum = cg->sum_into ? cg->sum_into[v] : IR_NONE, other = IR_NONE, narrow = IR_NONE;
    if (sum != IR_NONE)
        other = cuda_scatter_addend(cg->g, arg(cg, sum, 0) == cg->reader[v] ? arg(cg, sum, 1) : arg(cg, sum, 0), &narrow);
    bool rounds = narrow != IR_NONE && narrow != other;   /* other is f32(r(x)) */
    nrt_step *s = begin_kernel(cg, v, "_sum", NRT_GRID_ELEMENTS);
    add_int(s, numel);
    add_int(s, n->shape[0]);
    add_int(s, nidx);
    add_buf(s, x->start);
    add_buf(s, x->end);
    add_buf(s, x->first_chunk);
    add_buf(s, x->order);
    add_buf(s, arg(cg, v, 1));
    add_buf(s, x->chunk_sum);
    if (other != IR_NONE) add_buf(s, other);
    add_buf(s, sum != IR_NONE ? sum : v);
    cg_printf(&cg->body, "  const int *start = (const int *)A.buf[0], *end = (const int *)A.buf[1], *first_chunk = (const int *)A.buf[2];\n"
                         "  const int *order = (const int *)A.buf[3];\n");
    decl_ptr(cg, "src", 4, src->dtype, true);
    cg_printf(&cg->body, "  const float *chunk_sum = (const float *)A.buf[5];\n");
    if (other != IR_NONE) decl_ptr(cg, "o", 6, node(cg, other)->dtype, true);
    decl_ptr(cg, "y", other != IR_NONE ? 7 : 6, other != IR_NONE ? NC_F32 : n->dtype, false);
    emit_scatter_chunk_len(cg, "A.n[2]");
    emit_row_len(cg);
    /* a row's sum: over its range, or over its chunks' sums (chunk c's at c * row + col) */
    cg_printf(&cg->body, "  NC_GRID_STRIDE(i, A.n[0]) {\n    long long col; const long long r = nc_divmod(i, row_d, &col);\n"
                         "    const bool chunked = first_chunk[r] >= 0;\n"
                         "    const long long k0 = chunked ? first_chunk[r] : start[r];\n"
                         "    const long long k1 = chunked ? k0 + (end[r] - start[r] + per_chunk - 1) / per_chunk : end[r];\n"
                         "    float row_total;\n    if (chunked) {\n");
    emit_ordered_sum(cg, "      ", "chunk_sum", "(%s)");
    cg_printf(&cg->body, "      row_total = total;\n    } else {\n");
    emit_ordered_sum(cg, "      ", "src", "(long long)order[%s]");
    cg_printf(&cg->body, "      row_total = total;\n    }\n");
    if (other == IR_NONE)
        cg_printf(&cg->body, "    nc_st(y, i, row_total);\n  }\n");
    else   /* other + f32(round(row)), as the casts and the add would */
        cg_printf(&cg->body, "    y[i] = %s(nc_ld(o, i)) + %s(row_total);\n  }\n", rounds ? cuda_round_fn(node(cg, narrow)->dtype) : "",
                  cuda_round_fn(n->dtype));
    end_kernel(cg);
}

static bool cuda_emit_scatter_add(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *idx = node(cg, arg(cg, v, 0));
    uint32_t numel, nidx, row, chunks_numel;   /* row: the elements after the first axis */
    if (!numel_dim(cg, n, &numel) || !numel_dim(cg, idx, &nidx) || !span_dim(cg, n, 1, &row) ||
        !partials_dim(cg, n, row, SCATTER_CHUNKS, &chunks_numel))
        return false;
    uint32_t rows = n->shape[0];
    scatter_scratch x = {.start = new_temp(cg, rows, NC_I32), .end = new_temp(cg, rows, NC_I32),
                         .first_chunk = new_temp(cg, rows, NC_I32), .pos = new_temp(cg, nidx, NC_I32),
                         .order = new_temp(cg, nidx, NC_I32),
                         .chunk_row = new_temp(cg, ir_dim_const((ir_graph *)cg->g, SCATTER_CHUNKS + 1), NC_I32),
                         .chunk_sum = new_temp(cg, chunks_numel, NC_F32)};
    emit_scatter_count(cg, v, nidx, &x);
    emit_scatter_scan(cg, v, nidx, &x);
    emit_scatter_sort(cg, v, nidx, &x);
    emit_scatter_chunks(cg, v, nidx, chunks_numel, &x);
    emit_scatter_sum(cg, v, numel, nidx, &x);
    return true;
}

/* Which axes a reduction takes, in the shapes its kernels are fast for. */
typedef enum reduce_form {
    REDUCE_GENERAL,
    REDUCE_SUFFIX,   /* trailing axes (rows of the kept ones): each output reads contiguous elements */
    REDUCE_PREFIX,   /* leading axes (columns of the kept ones): a bias's gradient, a sum over the batch */
} reduce_form;

static reduce_form reduce_form_of(const ir_node *x, const bool *red)
{
    int first = x->rank, last = -1, nred = 0;
    for (int k = 0; k < x->rank; k++)
        if (red[k]) nred++, first = k < first ? k : first, last = k;
    if (nred == 0 || last - first + 1 != nred) return REDUCE_GENERAL;   /* none, or not contiguous */
    if (last == x->rank - 1) return REDUCE_SUFFIX;
    return first == 0 ? REDUCE_PREFIX : REDUCE_GENERAL;
}

/* A reduction's operand: x itself, or the inputs of the group it computes
 * as it loads (prologue). */
static void add_reduce_operand(cg_ctx *cg, ir_value v, uint32_t prologue, nrt_step *s)
{
    if (prologue) {
        cuda_fuse_prologue_inputs(cg, prologue, s);
        return;
    }
    add_buf(s, arg(cg, v, 0));
    decl_ptr(cg, "x", 0, node(cg, arg(cg, v, 0))->dtype, true);
}

/* A reduction over leading axes: x as [R, C], each of C outputs a column
 * sum. One thread a column reads a run of rows, so a warp reads 32
 * neighbouring elements of a row (a warp per output would read 32 rows),
 * eight loads in flight; `parts` runs of at least COLUMN_PART_ROWS rows give
 * partial results, which a second kernel adds in a fixed order (one run: no
 * second kernel). The sizes are a guess until measured on a GPU. */
enum { COLUMN_PARTS = 128, COLUMN_PART_ROWS = 32 };

/* A norm gradient's kernel that also sums columns over its rows
 * (cg->colsum_by, cg->params_by) runs COLSUM_BLOCKS blocks of 8 warps (or
 * fewer: colsum_blocks), each warp over every (8 x blocks)-th row, and
 * writes a partial row per block. 264: two blocks on each of an H100's 132
 * SMs, one wave (ptxas for sm_90: 86 registers a thread summing what it
 * stores, 128 under __launch_bounds__(256, 2) with the weight's terms too),
 * rows enough per warp to hide the loop's start; to be checked against
 * `netc inspect --profile` on the device. */
enum { COLSUM_BLOCKS = 264 };

/* The blocks of such a kernel over x ([..., C]): COLSUM_BLOCKS, or where
 * the row count is known at build time and smaller than their warps, a
 * block per 8 rows (fewer partial rows to keep and add up, each warp still
 * with a row of its own). Every kernel that writes or adds up the partial
 * rows asks this of the same rows. */
static int64_t colsum_blocks(const cg_ctx *cg, const ir_node *x)
{
    int64_t rows = 1, d;
    for (int i = 0; i + 1 < x->rank; i++) {
        if (!dim_is_const(&cg->g->dims[x->shape[i]], &d) || d > 8 * COLSUM_BLOCKS) return COLSUM_BLOCKS;
        rows *= d;
        if (rows > 8 * COLSUM_BLOCKS) return COLSUM_BLOCKS;
    }
    return rows < 8 ? 1 : (rows + 7) / 8;
}

/* One term of a float reduction's loop: the operand's element at `offset`
 * (computed as it loads, with a prologue) combined into acc. */
static void emit_reduce_term(cg_ctx *cg, const ir_node *n, uint32_t prologue, const char *offset, const char *indent)
{
    cg_buf *b = &cg->body;
    if (prologue) {
        cg_printf(b, "%sfloat pv;\n%s{ const long long i = %s;\n", indent, indent, offset);
        cuda_fuse_prologue_value(cg, prologue);
        if (cuda_fuse_prologue_stored(cg, prologue) != IR_NONE) cg_printf(b, "%snc_st(ys, i, pv);\n", indent);
        cg_printf(b, "%s}\n%sconst float a = acc, b = pv;\n", indent, indent);
    } else {
        cg_printf(b, "%sconst float a = acc, b = nc_ld(x, %s);\n", indent, offset);
    }
    cg_printf(b, "%sacc = %s;\n", indent, nc_cuda_exprs[n->op]);
}

/* What a reduction's accumulator starts from. */
static const char *reduce_init(const ir_node *n) { return n->op == OP_MAX ? "-__int_as_float(0x7f800000)" : "0.0f"; }

/* Adding up partial rows [P, C] (f32, row p at p C) column by column
 * leaves a GPU waiting on loads: a few hundred rows and a thread a column
 * (GPT-2's bias and norm gradients: 264 rows, 768 or 2304 columns) kept
 * ptxas at about 10 loads in flight, and a batch of eight such sums took
 * 62-108 us on an H200. So a warp takes a column: lane l combines rows l,
 * l + 32, ... in order (8 or 9 of 264), and the lanes meet by exchanges in
 * a fixed order, the same every run. A block's 8 warps read 8 neighbouring
 * columns of each row: one 32-byte sector. The threads: 32 C. */
static bool warp_column_threads(cg_ctx *cg, const ir_node *n, uint32_t C, uint32_t *out)
{
    dim_expr threads, lanes = dim_const(32);
    if (dim_mul(&cg->g->dims[C], &lanes, &threads) != DIM_OK) {
        snprintf(cg->err, sizeof cg->err, "%s: the partial results' size overflows", nc_ops[n->op].name);
        return false;
    }
    *out = ir_dim_intern((ir_graph *)cg->g, &threads);
    return true;
}

/* acc combined with the other lanes' (`combine` of a and b), the result in
 * every lane. */
static void emit_lanes_combine(cg_buf *b, const char *acc, const char *combine)
{
    for (int m = 1; m < 32; m *= 2)
        cg_printf(b, "    { const float a = %s, b = nc_lane_xor(%s, %d); %s = %s; }\n", acc, acc, m, acc, combine);
}

/* The second kernel of a column reduction: the `parts` partial rows of
 * part ([parts, C] f32) combined into stored (C: the result's dim id, X:
 * the operand's element count; parts 0: a sum over the X / C rows of part,
 * X its element count; epilogue: groups of the result's shape computed
 * from each total by the lane that has it, cuda_fuse_epilogue). */
static bool emit_column_total(cg_ctx *cg, ir_value v, ir_value stored, uint32_t part, int64_t parts, uint32_t C, uint32_t X,
                              const uint32_t *epilogue, int nepilogue)
{
    const ir_node *n = node(cg, v);
    const char *init = reduce_init(n), *combine = nc_cuda_exprs[n->op];
    uint32_t threads;
    if (!warp_column_threads(cg, n, C, &threads)) return false;
    cg_buf *b = &cg->body;
    /* with an epilogue, a kernel per element (runtime/program.c nrt_step_per_element): a result may take
     * the memory of an operand of its size, which the lane loads before it stores anything */
    nrt_step *s = begin_kernel(cg, v, nepilogue ? "_cols_sum_fused" : "_cols_sum", NRT_GRID_ELEMENTS);
    add_int(s, threads);
    add_int(s, C);
    add_int(s, X);
    add_buf(s, part);
    add_buf(s, stored);
    cg_printf(b, "  const float *part = (const float *)A.buf[0];\n");
    decl_ptr(cg, "y", 1, node(cg, stored)->dtype, false);
    cg_printf(b, "  const long long C = A.n[1], R = C > 0 ? A.n[2] / C : 0; (void)R;\n");
    cg_printf(b, "  NC_WARP_STRIDE(c, C) {\n    float acc = %s;\n#pragma unroll 8\n", init);
    if (parts > 0) cg_printf(b, "    for (int p = NC_LANE; p < %lld; p += 32)", (long long)parts);
    else cg_printf(b, "    for (long long p = NC_LANE; p < R; p += 32)");
    cg_printf(b, " { const float a = acc, b = part[p * C + c]; acc = %s; }\n", combine);
    emit_lanes_combine(b, "acc", combine);
    cg_printf(b, "    if (NC_LANE == 0) {\n%s", n->op == OP_MEAN ? "      acc = acc / (float)R;\n" : "");
    if (nepilogue) cuda_fuse_epilogue(cg, s, epilogue, nepilogue, v, "acc", "c");
    cg_printf(b, "      nc_st(y, c, acc);\n    }\n  }\n");
    end_kernel(cg);
    return true;
}

static void reduce_counts(const cg_ctx *cg, const ir_node *x, const bool *red, int64_t *reduced, int64_t *kept);
static int64_t split_parts(int64_t outputs, int64_t count);

/* The rows a column reduction's partial results split into. */
static int64_t column_parts(int64_t rows)
{
    int64_t parts = rows < 0 ? COLUMN_PARTS : rows / COLUMN_PART_ROWS;   /* rows < 0: not known until run time */
    return parts < 1 ? 1 : parts > COLUMN_PARTS ? COLUMN_PARTS : parts;
}

/* v's column reduction; with a sibling (cg->sibling_sum: a plain sum of
 * an input of v's prologue over the same rows) a second accumulator adds up
 * that input as the prologue loads it, stored as the sibling's result
 * (acc2, part2, y2). The kernel runs at `at`, the later of the two. */
static bool emit_column_reduce(cg_ctx *cg, ir_value v, uint32_t prologue, ir_value stored, int64_t rows, ir_value sib, ir_value at)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    int64_t parts = column_parts(rows);
    uint32_t C, X, grid;
    if (!numel_dim(cg, n, &C) || !numel_dim(cg, x, &X) || !partials_dim(cg, n, C, parts, &grid)) return false;
    uint32_t part = parts > 1 ? new_temp(cg, grid, NC_F32) : 0, part2 = parts > 1 && sib != IR_NONE ? new_temp(cg, grid, NC_F32) : 0;
    const char *init = reduce_init(n);
    nrt_step *s = begin_kernel(cg, at, prologue ? "_fused_cols" : "_cols", NRT_GRID_ELEMENTS);
    add_int(s, grid);
    add_int(s, C);
    add_int(s, X);
    add_reduce_operand(cg, v, prologue, s);
    ir_value kept = prologue ? cuda_fuse_prologue_stored(cg, prologue) : IR_NONE;
    NC_ASSERT(kept == IR_NONE || (sib == IR_NONE && node(cg, kept)->dtype == NC_F32));
    if (kept != IR_NONE) {   /* the group's result, stored as the prologue computes it */
        decl_ptr(cg, "ys", s->nbufs, NC_F32, false);
        add_buf(s, kept);
    }
    for (int k = 0; k < (sib != IR_NONE ? 2 : 1); k++) {
        const char *sfx = k ? "2" : "";
        ir_value to = k ? sib : stored;
        if (parts > 1) cg_printf(&cg->body, "  float *part%s = (float *)A.buf[%d];\n", sfx, s->nbufs);
        else decl_ptr(cg, k ? "y2" : "y", s->nbufs, node(cg, to)->dtype, false);
        add_buf(s, parts > 1 ? (k ? part2 : part) : to);
    }
    cg_buf *b = &cg->body;
    cg_printf(b, "  const long long C = A.n[1], R = C > 0 ? A.n[2] / C : 0;\n");
    cg_printf(b, "  NC_GRID_STRIDE(t, A.n[0]) {\n    const long long p = t / C, c = t - p * C;\n");
    cg_printf(b, "    float acc = %s, acc2 = %s; (void)acc2;\n", init, init);
    cg_printf(b, "#pragma unroll 8\n    for (long long r = p * R / %lld, end = (p + 1) * R / %lld; r < end; r++) {\n", (long long)parts,
              (long long)parts);
    if (sib != IR_NONE) {   /* the prologue's block, which loads the sibling's operand as in<k> */
        cg_printf(b, "      float pv, pv2;\n      { const long long i = r * C + c;\n");
        cuda_fuse_prologue_value(cg, prologue);
        cg_printf(b, "      pv2 = in%d; }\n", cuda_fuse_prologue_input(cg, prologue, arg(cg, sib, 0)));
        cg_printf(b, "      { const float a = acc, b = pv; acc = %s; }\n", nc_cuda_exprs[n->op]);
        cg_printf(b, "      { const float a = acc2, b = pv2; acc2 = %s; }\n", nc_cuda_exprs[node(cg, sib)->op]);
    } else {
        emit_reduce_term(cg, n, prologue, "r * C + c", "      ");
    }
    cg_printf(b, "    }\n");
    if (parts > 1) cg_printf(b, "    part[t] = acc;\n%s  }\n", sib != IR_NONE ? "    part2[t] = acc2;\n" : "");
    else {
        cg_printf(b, "%s    nc_st(y, c, acc);\n", n->op == OP_MEAN ? "    acc = acc / (float)R;\n" : "");
        if (sib != IR_NONE) cg_printf(b, "%s    nc_st(y2, c, acc2);\n", node(cg, sib)->op == OP_MEAN ? "    acc2 = acc2 / (float)R;\n" : "");
        cg_printf(b, "  }\n");
    }
    end_kernel(cg);
    if (parts == 1) return true;
    /* a total with an epilogue is added up where its group runs (cuda_emit_reduce_total) */
    bool later = cuda_fuse_epilogue_group(cg, v) != 0, later2 = sib != IR_NONE && cuda_fuse_epilogue_group(cg, sib) != 0;
    if (later) cg->kept_temp[v] = part;
    if (later2) cg->kept_temp[sib] = part2;
    return (later || emit_column_total(cg, v, stored, part, parts, C, X, NULL, 0)) &&
           (sib == IR_NONE || later2 || emit_column_total(cg, sib, sib, part2, parts, C, X, NULL, 0));
}

/* The operand's rows a reduction over leading axes takes, or -2 where r is
 * not a column reduction of floats (emit_column_reduce) whose partial
 * results another kernel adds up (and no other kernel writes them). */
static int64_t column_total_rows(const cg_ctx *cg, ir_value r)
{
    const ir_node *n = &cg->g->nodes[r];
    if (n->op != OP_SUM && n->op != OP_MEAN && n->op != OP_MAX) return -2;
    const ir_node *x = &cg->g->nodes[ir_args(cg->g, n)[0]];
    if ((cg->colsum_by && cg->colsum_by[r] != IR_NONE) || (cg->attn_colsum && cg->attn_colsum[r] != IR_NONE) || !dtype_is_float(x->dtype))
        return -2;
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < n->attr.naxes; k++) red[n->attr.axes[k]] = true;
    int64_t rows, kept;
    reduce_counts(cg, x, red, &rows, &kept);
    bool columns = reduce_form_of(x, red) == REDUCE_PREFIX && (kept < 0 || kept >= 32);
    return columns && column_parts(rows) > 1 ? rows : -2;
}

bool cuda_reduce_total_apart(const cg_ctx *cg, ir_value r) { return column_total_rows(cg, r) != -2; }

bool cuda_emit_reduce_total(cg_ctx *cg, ir_value r, const uint32_t *epilogue, int nepilogue)
{
    const ir_node *n = node(cg, r), *x = node(cg, arg(cg, r, 0));
    uint32_t C, X;
    NC_ASSERT(cg->kept_temp[r]);
    return numel_dim(cg, n, &C) && numel_dim(cg, x, &X) &&
           emit_column_total(cg, r, r, cg->kept_temp[r], column_parts(column_total_rows(cg, r)), C, X, epilogue, nepilogue);
}

bool cuda_reduce_by_columns(const cg_ctx *cg, ir_value v)
{
    const ir_node *n = &cg->g->nodes[v], *x = &cg->g->nodes[ir_args(cg->g, n)[0]];
    if ((n->op != OP_SUM && n->op != OP_MEAN) || (cg->colsum_by && cg->colsum_by[v] != IR_NONE) ||
        (cg->attn_colsum && cg->attn_colsum[v] != IR_NONE) || !dtype_is_float(x->dtype))
        return false;
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < n->attr.naxes; k++) red[n->attr.axes[k]] = true;
    int64_t rows, kept;
    reduce_counts(cg, x, red, &rows, &kept);
    return reduce_form_of(x, red) == REDUCE_PREFIX && (kept < 0 || kept >= 32);
}

bool cuda_reduce_takes_sibling(const cg_ctx *cg, ir_value v, int64_t *rows)
{
    const ir_node *n = &cg->g->nodes[v], *x = &cg->g->nodes[ir_args(cg->g, n)[0]];
    if ((cg->colsum_by && cg->colsum_by[v] != IR_NONE) || (cg->attn_colsum && cg->attn_colsum[v] != IR_NONE) || !dtype_is_float(x->dtype))
        return false;
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < n->attr.naxes; k++) red[n->attr.axes[k]] = true;
    int64_t kept;
    reduce_counts(cg, x, red, rows, &kept);
    reduce_form form = reduce_form_of(x, red);
    if (form == REDUCE_PREFIX && (kept < 0 || kept >= 32)) return true;   /* emit_column_reduce */
    return !(form == REDUCE_SUFFIX && split_parts(kept, *rows) > 1);     /* a warp an output, not split */
}

/* A reduction over trailing axes with few outputs (a loss summed over a
 * whole tensor): a warp an output would leave the GPU nearly idle (one warp
 * took 30 ms for the 12.6M elements of bench/kernels/attention.net's loss on
 * an H200), so each output's elements are split into `parts` runs, a warp
 * each, and emit_column_total adds the runs' results in order. */
enum { SPLIT_TARGET_WARPS = 4096, SPLIT_MAX_PARTS = 1024, SPLIT_MIN_WARP_ELEMS = 1024 };

/* The runs for a reduction of `outputs` outputs over `count` elements each
 * (count < 0: known only at run time), or 1 where one warp an output is as
 * good: many outputs, or few elements each. */
static int64_t split_parts(int64_t outputs, int64_t count)
{
    if (outputs <= 0 || outputs > SPLIT_TARGET_WARPS / 2) return 1;
    int64_t parts = SPLIT_TARGET_WARPS / outputs;
    if (count >= 0 && parts > count / SPLIT_MIN_WARP_ELEMS) parts = count / SPLIT_MIN_WARP_ELEMS;
    return parts > SPLIT_MAX_PARTS ? SPLIT_MAX_PARTS : parts < 2 ? 1 : parts;
}

static bool emit_split_reduce(cg_ctx *cg, ir_value v, uint32_t prologue, ir_value stored, int64_t parts)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    uint32_t C, X, grid;
    if (!numel_dim(cg, n, &C) || !numel_dim(cg, x, &X) || !partials_dim(cg, n, C, parts, &grid)) return false;
    uint32_t part = new_temp(cg, grid, NC_F32);
    const char *init = reduce_init(n), *combine = nc_cuda_exprs[n->op];
    nrt_step *s = begin_kernel(cg, v, prologue ? "_fused_split" : "_split", NRT_GRID_WARPS);
    add_int(s, grid);
    add_int(s, C);
    add_int(s, X);
    add_reduce_operand(cg, v, prologue, s);
    cg_buf *b = &cg->body;
    cg_printf(b, "  float *part = (float *)A.buf[%d];\n", s->nbufs);
    add_buf(s, part);
    cg_printf(b, "  const long long C = A.n[1], count = C > 0 ? A.n[2] / C : 0, P = %lld;\n", (long long)parts);
    cg_printf(b, "  const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;\n");
    cg_printf(b, "  const int lane = threadIdx.x & 31;\n  if (w >= A.n[0]) return;\n");
    cg_printf(b, "  const long long o = w / P, p = w - o * P;\n  float acc = %s;\n", init);
    cg_printf(b, "#pragma unroll 4\n  for (long long j = p * count / P + lane, end = (p + 1) * count / P; j < end; j += 32) {\n");
    cg_printf(b, "    const long long off = o * count + j;\n");
    emit_reduce_term(cg, n, prologue, "off", "    ");
    cg_printf(b, "  }\n");
    cg_printf(b, "  for (int s = 16; s > 0; s >>= 1) { const float a = acc, b = __shfl_xor_sync(0xffffffffu, acc, s); acc = %s; }\n",
              combine);
    cg_printf(b, "  if (lane == 0) part[p * C + o] = acc;\n");
    end_kernel(cg);
    return emit_column_total(cg, v, stored, part, parts, C, X, NULL, 0);
}

/* How many of x's elements each output of a reduction over the axes `red`
 * takes, and how many outputs there are: -1 where a dim is known only at
 * run time. */
static void reduce_counts(const cg_ctx *cg, const ir_node *x, const bool *red, int64_t *reduced, int64_t *kept)
{
    *reduced = *kept = 1;
    for (int k = 0; k < x->rank; k++) {
        int64_t d, *count = red[k] ? reduced : kept;
        bool known = dim_is_const(&cg->g->dims[x->shape[k]], &d);
        *count = known && *count >= 0 ? *count * d : -1;
    }
}

/* One warp per output element; lanes stride over the reduced elements
 * (contiguous ones when the reduced axes are trailing). Leading axes of a
 * float tensor go to emit_column_reduce. */
static bool cuda_emit_reduce(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    uint32_t prologue = cuda_fuse_prologue_group(cg, v);   /* the operand computed as it is loaded */
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < n->attr.naxes; k++) red[n->attr.axes[k]] = true;
    reduce_form form = reduce_form_of(x, red);
    ir_value stored = cg->widened_to && cg->widened_to[v] != IR_NONE ? cg->widened_to[v] : v;   /* the f32 widening, if so */
    if (cg->colsum_by && cg->colsum_by[v] != IR_NONE) {   /* the norm gradient's kernel wrote the partial sums */
        uint32_t C, X;
        NC_ASSERT(cg->kept_temp[v]);
        return numel_dim(cg, n, &C) && numel_dim(cg, x, &X) && emit_column_total(cg, v, stored, cg->kept_temp[v], colsum_blocks(cg, x), C, X, NULL, 0);
    }
    if (cg->attn_colsum && cg->attn_colsum[v] != IR_NONE) {   /* the attention gradients' kernels wrote the partial sums */
        uint32_t C;
        NC_ASSERT(cg->kept_temp[v] && n->op == OP_SUM);
        return numel_dim(cg, n, &C) && emit_column_total(cg, v, stored, cg->kept_temp[v], 0, C, cg->prog->temps[cg->kept_temp[v] - cg->g->nnodes].numel, NULL, 0);
    }
    int64_t reduced, kept;   /* elements summed into each output, and outputs (-1: known at run time) */
    reduce_counts(cg, x, red, &reduced, &kept);
    ir_value host = v, sib = cg->sibling_sum ? cg->sibling_sum[v] : IR_NONE;   /* one kernel for v and its sibling, here */
    if (sib != IR_NONE && !prologue) {   /* the sibling computes its operand with the prologue: it leads */
        host = sib, sib = v, stored = host;
        prologue = cuda_fuse_prologue_group(cg, host);
        n = node(cg, host);
    }
    if (form == REDUCE_PREFIX && dtype_is_float(x->dtype) && (kept < 0 || kept >= 32))
        return emit_column_reduce(cg, host, prologue, stored, reduced, sib, v);
    if (form == REDUCE_SUFFIX && dtype_is_float(x->dtype)) {
        int64_t parts = split_parts(kept, reduced);
        if (parts > 1) return emit_split_reduce(cg, v, prologue, stored, parts);
    }
    nrt_step *s = begin_kernel(cg, v, prologue ? "_fused" : "", NRT_GRID_WARPS);
    uint32_t numel;
    if (!numel_dim(cg, n, &numel)) return false;
    add_int(s, numel);
    add_shape(s, x);
    add_reduce_operand(cg, host, prologue, s);
    decl_ptr(cg, "y", s->nbufs, node(cg, stored)->dtype, false);
    add_buf(s, stored);
    if (sib != IR_NONE) {
        decl_ptr(cg, "y2", s->nbufs, node(cg, sib)->dtype, false);
        add_buf(s, sib);
    }
    bool is_float = dtype_is_float(x->dtype), is_max = n->op == OP_MAX;
    const char *acc_t = is_float ? "float" : "long long";
    cg_printf(&cg->body, "  const int r = %d;\n  const bool red[%d] = {", x->rank, x->rank ? x->rank : 1);
    for (int k = 0; k < x->rank; k++) cg_printf(&cg->body, "%s%d", k ? ", " : "", red[k]);
    if (!x->rank) cg_printf(&cg->body, "0");
    cg_printf(&cg->body, "};\n");
    cg_printf(&cg->body, "  long long count = 1;\n  for (int k = 0; k < r; k++) if (red[k]) count *= A.n[1 + k];\n");
    cg_printf(&cg->body, "  long long o = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;\n");
    cg_printf(&cg->body, "  int lane = threadIdx.x & 31;\n  if (o >= A.n[0]) return;\n");
    char x_numel[CG_DIVISOR_LEN] = "nc_capped_product(";   /* the bound of the offsets below */
    for (int k = 0; k < x->rank; k++) cg_snprintf(x_numel + strlen(x_numel), sizeof x_numel - strlen(x_numel), "%sA.n[%d]%s", k ? ", " : "", 1 + k, k == x->rank - 1 ? ")" : "");
    int first_kept = 0, first_red = 0;
    while (first_kept < x->rank && red[first_kept]) first_kept++;
    while (first_red < x->rank && !red[first_red]) first_red++;
    if (form != REDUCE_SUFFIX) {   /* base offset from the kept coordinates of o */
        cg_printf(&cg->body, "  nc_ix base = 0, rem = (nc_ix)o, stride = 1;\n");
        for (int k = x->rank - 1; k >= 0; k--) {
            if (!red[k] && k == first_kept) cg_printf(&cg->body, "  base += rem * stride;\n");   /* o is below the output's count */
            else if (!red[k]) cg_printf(&cg->body, "  { nc_ix c; rem = nc_divmod(rem, %s, &c); base += c * stride; }\n", divisor_slot(cg, 1 + k).s);
            if (k > first_kept) cg_printf(&cg->body, "  stride *= (nc_ix)A.n[%d];\n", 1 + k);   /* no kept axis reads it further out */
        }
    }
    cg_printf(&cg->body, "  %s acc = %s;\n", acc_t, is_max ? (is_float ? "-__int_as_float(0x7f800000)" : "NC_I64_MIN") : "0");
    if (sib != IR_NONE) cg_printf(&cg->body, "  float acc2 = 0;\n");
    cg_printf(&cg->body, "  for (long long j = lane; j < count; j += 32) {\n");
    if (form == REDUCE_SUFFIX) {   /* the kept coordinates lead: output o reads [o * count, (o + 1) * count) */
        cg_printf(&cg->body, "    const long long off = o * count + j;\n");
    } else {
        cg_printf(&cg->body, "    nc_ix off = base, jr = (nc_ix)j, st = 1;\n");
        for (int k = x->rank - 1; k >= 0; k--) {
            if (red[k] && k == first_red) cg_printf(&cg->body, "    off += jr * st;\n");   /* j is below count */
            else if (red[k]) cg_printf(&cg->body, "    { nc_ix c; jr = nc_divmod(jr, %s, &c); off += c * st; }\n", divisor_slot(cg, 1 + k).s);
            if (k > first_red) cg_printf(&cg->body, "    st *= (nc_ix)A.n[%d];\n", 1 + k);
        }
        cg_bound(cg, x->rank > 0 ? x_numel : "0");
    }
    if (sib != IR_NONE) {   /* the sibling's operand, as the prologue loads it, into acc2 */
        cg_printf(&cg->body, "    float pv, pv2;\n    { const long long i = off;\n");
        cuda_fuse_prologue_value(cg, prologue);
        cg_printf(&cg->body, "    pv2 = in%d; }\n", cuda_fuse_prologue_input(cg, prologue, arg(cg, sib, 0)));
        cg_printf(&cg->body, "    { const float a = acc2, b = pv2; acc2 = %s; }\n", nc_cuda_exprs[node(cg, sib)->op]);
        cg_printf(&cg->body, "    %s a = acc, b = pv;\n    acc = ", acc_t);
    } else if (prologue) {
        cg_printf(&cg->body, "    float pv;\n    { const long long i = off;\n");
        cuda_fuse_prologue_value(cg, prologue);
        cg_printf(&cg->body, "    }\n    %s a = acc, b = pv;\n    acc = ", acc_t);
    } else {
        cg_printf(&cg->body, "    %s a = acc, b = nc_ld(x, off);\n    acc = ", acc_t);
    }
    cg_printf(&cg->body, "%s;\n  }\n", nc_cuda_exprs[n->op]);
    cg_printf(&cg->body, "  for (int w = 16; w > 0; w >>= 1) { %s a = acc, b = __shfl_xor_sync(0xffffffffu, acc, w); acc = %s; }\n",
              acc_t, nc_cuda_exprs[n->op]);
    if (n->op == OP_MEAN) cg_printf(&cg->body, "  acc = acc / (float)count;\n");
    if (sib != IR_NONE) {
        cg_printf(&cg->body, "  for (int w = 16; w > 0; w >>= 1) { float a = acc2, b = __shfl_xor_sync(0xffffffffu, acc2, w); acc2 = %s; }\n",
                  nc_cuda_exprs[node(cg, sib)->op]);
        cg_printf(&cg->body, "%s  if (lane == 0) nc_st(y2, o, acc2);\n", node(cg, sib)->op == OP_MEAN ? "  acc2 = acc2 / (float)count;\n" : "");
    }
    /* An integer sum wraps to its dtype like the CPU executor's (cpu_exec.h)
     * before the store, whose conversion saturates (right for a cast fused
     * after it, wrong for the sum itself: a u8 sum of 614 stored 255, not 102). */
    if (!is_float) cg_printf(&cg->body, "  if (lane == 0) nc_st(y, o, (long long)(%s)acc);\n", storage_type(n->dtype));
    else cg_printf(&cg->body, "  if (lane == 0) nc_st(y, o, acc);\n");
    end_kernel(cg);
    return true;
}

/* Row-wise ops: one block of 256 threads per row of the last axis. */
static nrt_step *begin_rows(cg_ctx *cg, ir_value v, const ir_node *x, const char *suffix)
{
    nrt_step *s = begin_kernel(cg, v, suffix, NRT_GRID_ROWS);
    uint32_t numel;
    if (!numel_dim(cg, x, &numel)) return NULL;
    add_int(s, numel);
    add_int(s, x->shape[x->rank - 1]);
    cg_printf(&cg->body, "  const long long C = A.n[1], row = blockIdx.x;\n");
    return s;
}

/* `vec`: every pointer named is 16-byte aligned (rows of a multiple of 8
 * elements then are too). */
static void emit_vec_check(cg_buf *b, const char *const *ptrs, int n)
{
    cg_printf(b, "  const bool vec = ((0ull");
    for (int i = 0; i < n; i++) cg_printf(b, " | (unsigned long long)%s", ptrs[i]);
    cg_printf(b, ") & 15) == 0;\n");
}

/* A loop over a block's row, a = x[row, j] for each j: eight elements a
 * thread at a time (16-byte loads and, with y, stores) where the row's
 * length is a multiple of 8 and the rows are 16-byte aligned, one at a time
 * otherwise. body uses a (and j, with y); with y, it sets r, stored as
 * y[row, j].
 * GPT-2's loss rows are 50304 wide: a load and a store per element issue
 * about as many instructions as the row's bytes take to move. */
static void open_row_chunks(cg_buf *b, const char *y, int held)   /* xs[8] = x[row, j0 .. j0 + 8) */
{
    if (held) {   /* from the registers emit_row_hold filled */
        cg_printf(b, "  if (held) {\n#pragma unroll\n    for (int c = 0; c < %d; c++) {\n", held);
        cg_printf(b, "      const long long j0 = (threadIdx.x + (long long)blockDim.x * c) * 8;\n      if (j0 >= C) break;\n");
        cg_printf(b, "      float xs[8]%s;\n      nc_unpack8(x, row_held[c], xs);\n", y ? ", ys[8]" : "");
        return;
    }
    if (y) cg_printf(b, "  if (C %% 8 == 0 && (((unsigned long long)(x + row * C) | (unsigned long long)(%s + row * C)) & 15) == 0) {\n", y);
    else cg_printf(b, "  if (C %% 8 == 0 && ((unsigned long long)(x + row * C) & 15) == 0) {\n");
    cg_printf(b, "    for (long long j0 = threadIdx.x * 8LL; j0 < C; j0 += blockDim.x * 8LL) {\n");
    cg_printf(b, "      float xs[8]%s;\n      nc_ld8(x, row * C + j0, xs);\n", y ? ", ys[8]" : "");
}

static void open_row_elements(cg_buf *b)   /* closes the chunks' branch; a = x[row, j] */
{
    cg_printf(b, "  } else {\n");
    cg_printf(b, "    for (long long j = threadIdx.x; j < C; j += blockDim.x) {\n        const float a = nc_ld(x, row * C + j);\n");
}

static void emit_row_loop(cg_buf *b, const char *y, const char *body, int held)
{
    open_row_chunks(b, y, held);
    cg_printf(b, "#pragma unroll\n      for (int e = 0; e < 8; e++) {\n%s        const float a = xs[e];\n", y ? "        const long long j = j0 + e;\n" : "");
    cg_printf(b, "%s%s      }\n", body, y ? "        ys[e] = r;\n" : "");
    if (y) cg_printf(b, "      nc_st8(%s, row * C + j0, ys);\n", y);
    cg_printf(b, "    }\n");
    open_row_elements(b);
    cg_printf(b, "%s", body);
    if (y) cg_printf(b, "        nc_st(%s, row * C + j, r);\n", y);
    cg_printf(b, "    }\n  }\n");
}

/* One pass over row `row` of x (C long): each thread's running max and sum
 * of exp(x - max), rescaled when its max grows, then the block's: m and sum
 * (and total, the row's plain sum, with want_total). A wide row (a
 * vocabulary) is read once for its statistics instead of twice; a NaN
 * anywhere makes m NaN, as a max pass would. */
static void emit_row_online_stats(cg_ctx *cg, bool want_total, int held)
{
    cg_buf *b = &cg->body;
    cg_printf(b, "  const float ninf = -__int_as_float(0x7f800000);\n  float m = ninf, sum = 0.0f, total = 0.0f;\n");
    /* eight at a time: the max of the eight first, so the sum is rescaled
     * at most once, and each term one ex2 (a term per compare and branch
     * and expf's range reduction made this pass bound by instructions
     * issued, not by bytes). A NaN, or +inf, makes the sum NaN, and a NaN
     * sum makes m NaN. */
    open_row_chunks(b, NULL, held);
    cg_printf(b, "      const float cm = fmaxf(fmaxf(fmaxf(xs[0], xs[1]), fmaxf(xs[2], xs[3])), fmaxf(fmaxf(xs[4], xs[5]), fmaxf(xs[6], xs[7])));\n");
    cg_printf(b, "      if (cm > m) { sum *= nc_exp2((m - cm) * NC_LOG2E); m = cm; }\n");
    cg_printf(b, "      const float mb2 = (m == ninf ? 0.0f : m) * NC_LOG2E;\n#pragma unroll\n");
    cg_printf(b, "      for (int e = 0; e < 8; e++) { total += xs[e]; sum += nc_exp2(fmaf(xs[e], NC_LOG2E, -mb2)); }\n    }\n");
    cg_printf(b, "    if (sum != sum) m = sum;\n");
    open_row_elements(b);
    cg_printf(b, "        total += a;\n"
                 "        if (a > m) { sum = sum * expf(m - a) + 1.0f; m = a; }\n        else if (a > ninf) sum += expf(a - m);\n"
                 "        else if (a != a) m = a;\n    }\n  }\n");
    cg_printf(b, "  const float row_max = nc_block_max(m);\n  sum = nc_block_sum(m == ninf ? 0.0f : sum * expf(m - row_max));\n  m = row_max;\n");
    cg_printf(b, want_total ? "  total = nc_block_sum(total);\n" : "  (void)total;\n");
}

/* Rows of a constant length C, a multiple of 8 up to WARP_ROW_MAX, run a
 * warp a row: the row is read once into registers, eight elements a load
 * where every pointer is 16-byte aligned, and its statistics are warp
 * shuffles, with no block barrier (a block a row spends most of a short row
 * waiting at them). */
#define WARP_ROW_MAX 2048

/* A row op that reads its row for statistics and again to write y reads a
 * wide row (GPT-2's 50304 logits, 98 KiB) from memory twice where the rows
 * of the blocks in flight outgrow L2 (GPT-2's: 8 blocks on each of 132
 * multiprocessors). A row of 2-byte elements of constant length, at most
 * ROW_HELD_MAX_CHUNKS 16-byte chunks a thread, is held in registers
 * instead (as loaded, 4 a chunk): one read. 0: not held. */
#define ROW_HELD_MAX_CHUNKS 28

static int row_held_chunks(const cg_ctx *cg, const ir_node *x)
{
    int64_t C;
    if (x->rank < 1 || dtype_size(x->dtype) != 2 || !dtype_is_float(x->dtype) ||
        !dim_is_const(&cg->g->dims[x->shape[x->rank - 1]], &C) || C % 8 || C <= WARP_ROW_MAX)
        return 0;
    int64_t chunks = (C / 8 + 255) / 256;   /* begin_rows: 256 threads a row */
    return chunks <= ROW_HELD_MAX_CHUNKS ? (int)chunks : 0;
}

/* Load this thread's chunks of the row into row_held; `held` says they
 * are there (x's and y's rows 16-byte aligned; enough threads). */
static void emit_row_hold(cg_buf *b, const char *y, int held)
{
    char yrow[32];
    cg_snprintf(yrow, sizeof yrow, "(%s + row * C)", y);
    const char *ptrs[] = {"(x + row * C)", yrow};
    emit_vec_check(b, ptrs, 2);
    cg_printf(b, "  const bool held = vec && blockDim.x * %dLL * 8 >= C;\n", held);
    cg_printf(b, "  uint4 row_held[%d];\n  if (held) {\n#pragma unroll\n    for (int c = 0; c < %d; c++) {\n", held, held);
    cg_printf(b, "      const long long j0 = (threadIdx.x + (long long)blockDim.x * c) * 8;\n");
    cg_printf(b, "      if (j0 < C) row_held[c] = nc_ld16(x, row * C + j0);\n    }\n  }\n");
}

/* exp(a - m) of a row's element a, m2 = m log2(e): a multiply-add and an
 * ex2, where expf's range reduction took a handful more instructions an
 * element of the pass that writes (the statistics' pass sums the same way);
 * -inf and NaN come out as expf's would. */
#define ROW_EXP "nc_exp2(fmaf(a, NC_LOG2E, -m2))"

static bool cuda_emit_softmax(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    nrt_step *s = begin_rows(cg, v, x, "");
    if (!s) return false;
    add_buf(s, arg(cg, v, 0));
    add_buf(s, v);
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "y", 1, n->dtype, false);
    int held = row_held_chunks(cg, x);
    if (held) emit_row_hold(&cg->body, "y", held);
    emit_row_online_stats(cg, false, held);
    if (n->op == OP_LOG_SOFTMAX)
        cg_printf(&cg->body, "  float lse = m + logf(sum);\n");
    else
        cg_printf(&cg->body, "  const float inv = 1.0f / sum, m2 = m * NC_LOG2E;\n");
    emit_row_loop(&cg->body, "y", n->op == OP_LOG_SOFTMAX ? "        const float r = a - lse;\n" : "        const float r = " ROW_EXP " * inv;\n", held);
    end_kernel(cg);
    return true;
}

bool cuda_warp_rows(const cg_ctx *cg, const ir_node *x, int64_t *C)
{
    return x->rank >= 1 && dim_is_const(&cg->g->dims[x->shape[x->rank - 1]], C) && *C >= 8 && *C % 8 == 0 &&
           *C <= WARP_ROW_MAX;
}

static int row_chunks(int64_t C) { return (int)((C / 8 + 31) / 32); }

/* The dim id of `times` x the row count of x ([..., C]). */
static bool row_count_dim(cg_ctx *cg, const ir_node *x, int64_t times, uint32_t *out)
{
    dim_expr p = dim_const(times);
    for (int i = 0; i + 1 < x->rank; i++)
        if (dim_mul(&p, &cg->g->dims[x->shape[i]], &p) != DIM_OK) {
            snprintf(cg->err, sizeof cg->err, "the row count of a row op is too complex to express");
            return false;
        }
    *out = ir_dim_intern((ir_graph *)cg->g, &p);
    return true;
}

/* A warp-row kernel: A.n[0] rows of C; `row`, `lane` and `C` in scope. */
static nrt_step *begin_warp_rows(cg_ctx *cg, ir_value v, const ir_node *x, int64_t C)
{
    uint32_t rows;
    if (!row_count_dim(cg, x, 1, &rows)) return NULL;
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_WARPS);
    add_int(s, rows);
    cg_printf(&cg->body, "  const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5, C = %lld;\n", (long long)C);
    cg_printf(&cg->body, "  const int lane = threadIdx.x & 31;\n  if (row >= A.n[0]) return;   /* the whole warp: it has one row */\n");
    return s;
}

/* float v[chunks][8]: this lane's chunks of the row of p (elements
 * (lane + 32 c) * 8 on), zeros past C. */
static void emit_row_chunks(cg_buf *b, const char *v, const char *p, int chunks)
{
    cg_printf(b, "  float %s[%d][8];\n#pragma unroll\n  for (int c = 0; c < %d; c++) {\n", v, chunks, chunks);
    cg_printf(b, "    const long long j = (long long)(lane + 32 * c) * 8;\n");
    cg_printf(b, "    if (j >= C) { for (int e = 0; e < 8; e++) %s[c][e] = 0.0f; continue; }\n", v);
    cg_printf(b, "    if (vec) nc_ld8(%s, row * C + j, %s[c]); else for (int e = 0; e < 8; e++) %s[c][e] = nc_ld(%s, row * C + j + e);\n  }\n",
              p, v, v, p);
}

/* mean and rstd of the row in xv (layernorm; rmsnorm: mean 0), two passes
 * over the registers. */
static void emit_warp_row_stats(cg_ctx *cg, bool ln, double eps, int chunks)
{
    cg_buf *b = &cg->body;
    char e[48];
    cg_printf(b, "  float sum = 0.0f, sq = 0.0f;\n");
    if (ln) cg_printf(b, "#pragma unroll\n  for (int c = 0; c < %d; c++) for (int e = 0; e < 8; e++) sum += xv[c][e];\n", chunks);
    cg_printf(b, "  const float mean = %s;\n", ln ? "nc_warp_sum(sum) / (float)C" : "0.0f");
    cg_printf(b, "#pragma unroll\n  for (int c = 0; c < %d; c++)\n    if ((long long)(lane + 32 * c) * 8 < C)\n"
                 "      for (int e = 0; e < 8; e++) { const float d = xv[c][e] - mean; sq += d * d; }\n", chunks);
    cg_printf(b, "  const float rstd = rsqrtf(nc_warp_sum(sq) / (float)C + %s);\n", flit(e, eps));
}

/* Opens a loop over this lane's chunks inside the row: `c`, and `j`, the
 * chunk's first element. */
static void emit_chunk_loop(cg_buf *b, int chunks)
{
    cg_printf(b, "#pragma unroll\n  for (int c = 0; c < %d; c++) {\n    const long long j = (long long)(lane + 32 * c) * 8;\n"
                 "    if (j >= C) continue;\n", chunks);
}

/* float v[8]: elements j to j + 7 of the row parameter p (a norm's weight
 * or bias), one 16-byte load where vec allows: the same for every row, but
 * 8 scalar loads a chunk were 48 load instructions a row in a layernorm
 * that issues 3 for its row. */
static void emit_param_chunk(cg_buf *b, const char *v, const char *p)
{
    cg_printf(b, "    float %s[8];\n    if (vec) nc_ld8(%s, j, %s); else for (int e = 0; e < 8; e++) %s[e] = nc_ld(%s, j + e);\n", v, p, v, v,
              p);
}

/* Store o[8] at element j of the row of p. */
static void emit_row_store(cg_buf *b, const char *p, const char *o)
{
    cg_printf(b, "    if (vec) nc_st8(%s, row * C + j, %s); else for (int e = 0; e < 8; e++) nc_st(%s, row * C + j + e, %s[e]);\n", p, o,
              p, o);
}

/* layernorm / rmsnorm a warp a row, from the buffers cuda_emit_norm set. */
static void emit_norm_warp_body(cg_ctx *cg, bool ln, double eps, int chunks)
{
    cg_buf *b = &cg->body;
    const char *ptrs[] = {"x", "y", "w", "b"};
    emit_vec_check(b, ptrs, ln ? 4 : 3);
    emit_row_chunks(b, "xv", "x", chunks);
    emit_warp_row_stats(cg, ln, eps, chunks);
    emit_chunk_loop(b, chunks);
    emit_param_chunk(b, "wv", "w");
    if (ln) emit_param_chunk(b, "bv", "b");
    cg_printf(b, "    float o[8];\n    for (int e = 0; e < 8; e++) o[e] = (xv[c][e] - mean) * rstd * wv[e]%s;\n", ln ? " + bv[e]" : "");
    emit_row_store(b, "y", "o");
    cg_printf(b, "  }\n");
}

/* A row's mean (layernorm; 0 for rmsnorm) and rstd = 1/sqrt(var + eps), in
 * the block: the statistics the norms and their backward share. */
static void emit_row_stats(cg_ctx *cg, bool ln, double eps)
{
    cg_buf *b = &cg->body;
    if (ln) {
        cg_printf(b, "  float sum = 0.0f;\n");
        cg_printf(b, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) sum += nc_ld(x, row * C + j);\n");
        cg_printf(b, "  const float mean = nc_block_sum(sum) / (float)C;\n  float sq = 0.0f;\n");
        cg_printf(b, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) { float d = nc_ld(x, row * C + j) - mean; sq += d * d; }\n");
    } else {
        cg_printf(b, "  const float mean = 0.0f;\n  float sq = 0.0f;\n");
        cg_printf(b, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) { float d = nc_ld(x, row * C + j); sq += d * d; }\n");
    }
    char e[48];
    cg_printf(b, "  const float rstd = rsqrtf(nc_block_sum(sq) / (float)C + %s);\n", flit(e, eps));
}

/* What a norm gradient's warp-row kernel does beside dx. */
typedef struct norm_grad_form {
    bool ln;            /* layernorm (else rmsnorm: mean 0) */
    double eps;
    int chunks;         /* row_chunks(C) */
    bool keep_stats;    /* store each row's mean and rstd (stats) */
    const char *plus;   /* dx rounded by this function, plus `other`, is what is stored; NULL: dx alone */
    nc_dtype other;     /* other's dtype (with plus) */
    const char *colsum; /* add what is stored, rounded by this function, to colpart; NULL: no column sum */
    int param_sets;     /* sum g xhat (1), and g (2), into psum: the weight's (and bias's) gradient; 0: no */
    int64_t smem;       /* bytes of shared memory the kernel declares beside (colpart) */
} norm_grad_form;

/* A warp-row kernel's blocks are 8 warps (NRT_GRID_WARPS); static shared
 * memory stops at 48 KiB a block. */
#define NORM_WARP_THREADS 256
#define NORM_STAGE_MAX_SMEM ((int64_t)40 << 10)

/* The 16-byte pieces of a lane's chunk of 8 elements of t. */
static int chunk_pieces(nc_dtype t) { return (int)(8 * dtype_size(t) / 16); }

/* `other` (added to dx at the end) is copied to shared memory at the top of
 * the row, without registers (cp.async), so its load overlaps the row's
 * reductions instead of waiting after them: each thread reads back only
 * what it copied. Where the staging would pass the shared memory a block
 * may declare, other is loaded at the end as before. */
static bool norm_grad_stages_other(const norm_grad_form *f)
{
    if (!f->plus || dtype_size(f->other) < 2) return false;
    int64_t stage = (int64_t)NORM_WARP_THREADS * f->chunks * chunk_pieces(f->other) * 16;
    return stage + f->smem <= NORM_STAGE_MAX_SMEM;
}

static void emit_other_stage(cg_buf *b, const norm_grad_form *f)
{
    int pieces = chunk_pieces(f->other);
    cg_printf(b, "  __shared__ uint4 other_stage[%d][%d];   /* this thread's chunks of the row of other */\n", NORM_WARP_THREADS,
              f->chunks * pieces);
    cg_printf(b, "  if (vec) {\n#pragma unroll\n    for (int c = 0; c < %d; c++) {\n      const long long j = (long long)(lane + 32 * c) * 8;\n"
                 "      if (j < C)\n        for (int q = 0; q < %d; q++)\n"
                 "          nc_cp16((unsigned *)&other_stage[threadIdx.x][c * %d + q], other + row * C + j + q * %d, true);\n"
                 "    }\n  }\n",
              f->chunks, pieces, pieces, 8 / pieces);
}

/* dx a warp a row: x and g held in registers, dx = rstd (g w - mean(g w)
 * - xhat mean(g w xhat)) as the block kernel computes it. */
static void emit_norm_grad_warp_body(cg_ctx *cg, const norm_grad_form *f)
{
    cg_buf *b = &cg->body;
    const char *ptrs[] = {"x", "g", "dx", "w", "other"};
    emit_vec_check(b, ptrs, f->plus ? 5 : 4);
    bool staged = norm_grad_stages_other(f);
    if (staged) emit_other_stage(b, f);
    emit_row_chunks(b, "xv", "x", f->chunks);
    emit_row_chunks(b, "gv", "g", f->chunks);
    emit_warp_row_stats(cg, f->ln, f->eps, f->chunks);
    if (f->keep_stats) cg_printf(b, "  if (lane == 0) { stats[2 * row] = mean; stats[2 * row + 1] = rstd; }\n");
    cg_printf(b, "  float m1 = 0.0f, m2 = 0.0f;\n");
    emit_chunk_loop(b, f->chunks);
    emit_param_chunk(b, "wv", "w");
    cg_printf(b, "    for (int e = 0; e < 8; e++) {\n");
    if (f->param_sets > 0) cg_printf(b, "      psum[0][c][e] += gv[c][e] * (xv[c][e] - mean) * rstd;\n");
    if (f->param_sets > 1) cg_printf(b, "      psum[1][c][e] += gv[c][e];\n");
    cg_printf(b, "      const float gw = gv[c][e] * wv[e];\n      gv[c][e] = gw;\n"
                 "      m1 += gw;\n      m2 += gw * (xv[c][e] - mean) * rstd;\n    }\n  }\n");
    cg_printf(b, "  m1 = %s;\n  m2 = nc_warp_sum(m2) / (float)C;\n", f->ln ? "nc_warp_sum(m1) / (float)C" : "0.0f");
    if (staged) cg_printf(b, "  nc_cp_wait();\n");
    emit_chunk_loop(b, f->chunks);
    cg_printf(b, "    float o[8];\n    for (int e = 0; e < 8; e++) o[e] = rstd * (gv[c][e] - m1 - (xv[c][e] - mean) * rstd * m2);\n");
    if (f->plus) {   /* dx rounded as its store would be, plus the other gradient of x */
        if (staged)
            cg_printf(b, "    float ov[8];\n    if (vec) nc_ld8((const %s *)&other_stage[threadIdx.x][c * %d], 0, ov); "
                         "else for (int e = 0; e < 8; e++) ov[e] = nc_ld(other, row * C + j + e);\n",
                      storage_type(f->other), chunk_pieces(f->other));
        else
            cg_printf(b, "    float ov[8];\n    if (vec) nc_ld8(other, row * C + j, ov); else for (int e = 0; e < 8; e++) ov[e] = nc_ld(other, row * C + j + e);\n");
        cg_printf(b, "    for (int e = 0; e < 8; e++) o[e] = %s(o[e]) + ov[e];\n", f->plus);
    }
    if (f->colsum)
        cg_printf(b, "    for (int e = 0; e < 8; e++) colpart[warp][j + (j >> 5) + e] += %s(o[e]);   /* the column sum adds what is stored */\n",
                  f->colsum);
    emit_row_store(b, "dx", "o");
    cg_printf(b, "  }\n");
}

/* The warp-row loop of a norm gradient that sums columns over its rows:
 * every warp takes rows 8 x colsum_blocks apart. What it stores (a bias's
 * gradient) it adds into its own row of colpart in shared memory (each lane
 * its own columns: no two threads touch one sum, and registers stay free
 * for the rows); the weight's (and bias's) gradient terms it adds into
 * psum, registers of the lane's own columns. At the end the block adds its
 * 8 warps' sums, in order, into its row of each set of partial sums. A
 * lane's 8 columns are 8 apart from the next lane's: one word of padding
 * after every 32 columns puts the 32 lanes' adds in 32 distinct banks
 * (unpadded, every 4th lane shares a bank: 8-way conflicts). */
static int64_t colpart_row(int64_t C) { return C + C / 32; }

/* The shared memory begin_colsum_rows declares, where the kernel sums columns. */
static int64_t colsum_rows_smem(ir_value colsum, ir_value params, int64_t C)
{
    return colsum != IR_NONE || params != IR_NONE ? 8 * colpart_row(C) * (int64_t)sizeof(float) : 0;
}

static nrt_step *begin_colsum_rows(cg_ctx *cg, ir_value v, const ir_node *x, int64_t C, int param_sets)
{
    uint32_t rows;
    if (!row_count_dim(cg, x, 1, &rows)) return NULL;
    nrt_step *s = begin_kernel(cg, v, "_colsums", NRT_GRID_WARPS);
    dim_expr warps = dim_const(8 * colsum_blocks(cg, x));
    add_int(s, ir_dim_intern((ir_graph *)cg->g, &warps));
    add_int(s, rows);
    cg_buf *b = &cg->body;
    cg_printf(b, "  const long long C = %lld;\n  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n", (long long)C);
    long long padded = (long long)colpart_row(C);
    cg_printf(b, "  __shared__ float colpart[8][%lld];\n  for (long long j = lane; j < %lld; j += 32) colpart[warp][j] = 0.0f;\n", padded,
              padded);
    cg_printf(b, "  __syncthreads();\n");
    if (param_sets) {
        cg_printf(b, "  float psum[%d][%d][8];\n", param_sets, row_chunks(C));
        cg_printf(b, "#pragma unroll\n  for (int c = 0; c < %d; c++) for (int e = 0; e < 8; e++) {", row_chunks(C));
        for (int t = 0; t < param_sets; t++) cg_printf(b, " psum[%d][c][e] = 0.0f;", t);
        cg_printf(b, " }\n");
    }
    cg_printf(b, "  for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < A.n[1]; row += A.n[0]) {\n");
    return s;
}

/* The block's row of partial sums in parts (at slot) from the 8 warps' rows
 * of colpart, added in order. */
static void emit_block_colsum(cg_buf *b, int slot, const char *row)
{
    cg_printf(b, "  for (int c = threadIdx.x; c < C; c += blockDim.x) {\n    float t = 0.0f;\n"
                 "    for (int k = 0; k < 8; k++) t += colpart[k][c + (c >> 5)];\n    ((float *)A.buf[%d])[(%s) * C + c] = t;\n  }\n",
              slot, row);
}

/* Closes the row loop and writes the block's partial sums: of what it
 * stored (parts_slot, [blocks, C]) and of each set of psum (param_slot,
 * [param_sets, blocks, C]), the warps' registers passed through colpart one
 * set at a time; -1: none. */
static void end_colsum_rows(cg_ctx *cg, int parts_slot, int param_slot, int param_sets, int chunks, int64_t blocks)
{
    cg_buf *b = &cg->body;
    cg_printf(b, "  }\n  __syncthreads();\n");
    if (parts_slot >= 0) emit_block_colsum(b, parts_slot, "blockIdx.x");
    for (int t = 0; param_slot >= 0 && t < param_sets; t++) {
        cg_printf(b, "  __syncthreads();\n");
        emit_chunk_loop(b, chunks);
        cg_printf(b, "    for (int e = 0; e < 8; e++) colpart[warp][j + (j >> 5) + e] = psum[%d][c][e];\n  }\n  __syncthreads();\n", t);
        char row[64];
        cg_snprintf(row, sizeof row, "%lld + blockIdx.x", (long long)(t * blocks));
        emit_block_colsum(b, param_slot, row);
    }
}

/* The first w after v with of[w] == v (IR_NONE: none, or no plan). */
static ir_value later_user(const cg_ctx *cg, const ir_value *of, ir_value v)
{
    for (ir_value w = v + 1; of && w < cg->g->nnodes; w++)
        if (of[w] == v) return w;
    return IR_NONE;
}

/* One block a row: the row's statistics again, the two means of g w, then
 * every element of dx. When the weight's gradient reads them
 * (cg->stats_from), thread 0 also stores the row's mean and rstd. A warp a
 * row where C allows; then the kernel may also sum columns as it goes: of
 * what it stores (cg->colsum_by) and the terms of its weight's gradient
 * (cg->params_by), which then needs no statistics kept. */
static bool cuda_emit_norm_grad(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    bool ln = n->op == OP_LAYERNORM_GRAD, keep_stats = false;
    int64_t C;
    bool warp = cuda_warp_rows(cg, x, &C);
    ir_value colsum = warp ? later_user(cg, cg->colsum_by, v) : IR_NONE;   /* a sum of the stored rows' columns */
    ir_value params = warp ? later_user(cg, cg->params_by, v) : IR_NONE;   /* a weight gradient summed here */
    for (ir_value w = v + 1; cg->stats_from && w < cg->g->nnodes && !keep_stats; w++)
        keep_stats = cg->stats_from[w] == v && w != params;
    uint32_t stats_numel = 0;
    if (keep_stats && !row_count_dim(cg, x, 2, &stats_numel)) return false;   /* each row's mean and rstd */
    int param_sets = params == IR_NONE ? 0 : cg->bias_grad_with && cg->bias_grad_with[params] != IR_NONE ? 2 : 1;
    nrt_step *s = colsum != IR_NONE || params != IR_NONE ? begin_colsum_rows(cg, v, x, C, param_sets)
                : warp                                   ? begin_warp_rows(cg, v, x, C)
                                                         : begin_rows(cg, v, x, "");
    if (!s) return false;
    for (int i = 0; i < 3; i++) add_buf(s, arg(cg, v, i));
    ir_value sum = cg->sum_to ? cg->sum_to[v] : IR_NONE, other = IR_NONE;   /* dx + other, stored as sum */
    if (sum != IR_NONE) {
        other = arg(cg, sum, 0) == v ? arg(cg, sum, 1) : arg(cg, sum, 0);
        decl_ptr(cg, "other", s->nbufs, n->dtype, true);
        add_buf(s, other);
    }
    if (keep_stats) {   /* before dx: a row step's result is its last buffer */
        cg->kept_temp[v] = new_temp(cg, stats_numel, NC_F32);
        cg_printf(&cg->body, "  float *stats = (float *)A.buf[%d];\n", s->nbufs);
        add_buf(s, cg->kept_temp[v]);
    }
    int parts_slot = -1, param_slot = -1;
    int64_t blocks = colsum_blocks(cg, x);
    if (colsum != IR_NONE) {   /* the partial sums [blocks, C], which the sum's kernel adds up */
        dim_expr numel = dim_const(blocks * C);
        cg->kept_temp[colsum] = new_temp(cg, ir_dim_intern((ir_graph *)cg->g, &numel), NC_F32);
        parts_slot = s->nbufs;
        add_buf(s, cg->kept_temp[colsum]);
    }
    if (params != IR_NONE) {   /* [param_sets, blocks, C], which the weight gradient's kernel adds up */
        dim_expr numel = dim_const(param_sets * blocks * C);
        cg->kept_temp[params] = new_temp(cg, ir_dim_intern((ir_graph *)cg->g, &numel), NC_F32);
        param_slot = s->nbufs;
        add_buf(s, cg->kept_temp[params]);
        cuda_kernel_bounds(cg, 256, 2);   /* the sums' registers must not cost the second block an SM */
    }
    decl_ptr(cg, "dx", s->nbufs, n->dtype, false);
    add_buf(s, sum != IR_NONE ? sum : v);
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "w", 1, node(cg, arg(cg, v, 1))->dtype, true);
    decl_ptr(cg, "g", 2, node(cg, arg(cg, v, 2))->dtype, true);
    const char *plus = sum != IR_NONE ? cuda_round_fn(n->dtype) : NULL;   /* dx rounded as its own store would, plus the other */
    cg_buf *b = &cg->body;
    if (warp) {   /* a column sum adds dx as stored: rounded to its dtype */
        norm_grad_form f = {.ln = ln, .eps = n->attr.f, .chunks = row_chunks(C), .keep_stats = keep_stats, .plus = plus,
                            .other = n->dtype, .colsum = colsum != IR_NONE ? cuda_round_fn(n->dtype) : NULL,
                            .param_sets = param_sets, .smem = colsum_rows_smem(colsum, params, C)};
        emit_norm_grad_warp_body(cg, &f);
        if (colsum != IR_NONE || params != IR_NONE) end_colsum_rows(cg, parts_slot, param_slot, param_sets, f.chunks, blocks);
        end_kernel(cg);
        return true;
    }
    emit_row_stats(cg, ln, n->attr.f);
    if (keep_stats) cg_printf(b, "  if (threadIdx.x == 0) { stats[2 * row] = mean; stats[2 * row + 1] = rstd; }\n");
    cg_printf(b, "  float m1 = 0.0f, m2 = 0.0f;\n");
    cg_printf(b, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) {\n"
                 "    const float gw = nc_ld(g, row * C + j) * nc_ld(w, j);\n"
                 "    m1 += gw;\n    m2 += gw * (nc_ld(x, row * C + j) - mean) * rstd;\n  }\n");
    cg_printf(b, "  m1 = %s;\n  m2 = nc_block_sum(m2) / (float)C;\n", ln ? "nc_block_sum(m1) / (float)C" : "0.0f");
    cg_printf(b, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) {\n"
                 "    const float xh = (nc_ld(x, row * C + j) - mean) * rstd;\n");
    if (sum != IR_NONE)
        cg_printf(b, "    nc_st(dx, row * C + j, %s(rstd * (nc_ld(g, row * C + j) * nc_ld(w, j) - m1 - xh * m2)) + nc_ld(other, row * C + j));\n  }\n",
                  plus);
    else
        cg_printf(b, "    nc_st(dx, row * C + j, rstd * (nc_ld(g, row * C + j) * nc_ld(w, j) - m1 - xh * m2));\n  }\n");
    end_kernel(cg);
    return true;
}

enum { NORM_PARTS = 128 };   /* partial rows of a norm's parameter gradients */

/* The first kernel of a norm's parameter gradient: ints NORM_PARTS x C (the
 * grid), C, x's element count; buffers x, g. */
static nrt_step *begin_norm_param_parts(cg_ctx *cg, ir_value v, const char *suffix, nrt_grid kind, uint32_t grid, uint32_t X)
{
    const ir_node *x = node(cg, arg(cg, v, 0));
    nrt_step *s = begin_kernel(cg, v, suffix, kind);
    add_int(s, grid);
    add_int(s, x->shape[x->rank - 1]);
    add_int(s, X);
    add_buf(s, arg(cg, v, 0));
    add_buf(s, arg(cg, v, 1));
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "g", 1, x->dtype, true);
    return s;
}

/* The weight gradient (and the bias's along) as a column sum over [rows, C]
 * reading each row's mean and rstd from stats (cuda_emit_norm_grad): one
 * thread a column and run of rows, eight loads in flight, into the same
 * partial rows as the block kernel's (NORM_PARTS runs; the later of them
 * may be empty). */
static bool emit_norm_param_columns(cg_ctx *cg, ir_value v, ir_value bias, uint32_t stats, uint32_t parts, uint32_t grid,
                                    uint32_t X)
{
    const ir_node *n = node(cg, v);
    int sets = bias != IR_NONE ? 2 : 1;
    nrt_step *s = begin_norm_param_parts(cg, v, "_cols", NRT_GRID_ELEMENTS, grid, X);
    add_buf(s, stats);
    add_buf(s, parts);
    cg_buf *b = &cg->body;
    cg_printf(b, "  const float *stats = (const float *)A.buf[2];\n  float *part = (float *)A.buf[3];\n");
    cg_printf(b, "  const long long C = A.n[1], R = C > 0 ? A.n[2] / C : 0;\n");
    cg_printf(b, "  NC_GRID_STRIDE(t, A.n[0]) {\n    const long long p = t / C, c = t - p * C;\n    float acc0 = 0.0f, acc1 = 0.0f;\n");
    cg_printf(b, "#pragma unroll 8\n    for (long long r = p * R / %d, end = (p + 1) * R / %d; r < end; r++) {\n", NORM_PARTS,
              NORM_PARTS);
    cg_printf(b, "      const float gv = nc_ld(g, r * C + c);\n");
    cg_printf(b, "      acc0 += gv * %s;\n", n->attr.axis == 1 ? "(nc_ld(x, r * C + c) - stats[2 * r]) * stats[2 * r + 1]"
                                                                : "nc_ld(x, r * C + c) * stats[2 * r + 1]");
    cg_printf(b, "      acc1 += gv;\n    }\n    part[t] = acc0;\n");
    if (sets == 2) cg_printf(b, "    part[%d * C + t] = acc1;\n", NORM_PARTS);
    cg_printf(b, "    (void)acc1;\n  }\n");
    end_kernel(cg);
    return true;
}

/* The nparts partial rows of each set added up by column, a warp a column
 * as in emit_column_total. */
static bool emit_norm_param_sum(cg_ctx *cg, ir_value v, ir_value bias, uint32_t parts, int nparts)
{
    const ir_node *x = node(cg, arg(cg, v, 0));
    int sets = bias != IR_NONE ? 2 : 1;
    uint32_t C = x->shape[x->rank - 1], threads;
    if (!warp_column_threads(cg, node(cg, v), C, &threads)) return false;
    cg_buf *b = &cg->body;
    nrt_step *s = begin_kernel(cg, v, "_sum", NRT_GRID_ELEMENTS);
    add_int(s, threads);
    add_int(s, C);
    add_buf(s, parts);
    ir_value made[2] = {v, bias};
    const char *round[2] = {"", ""};   /* stored as f32(bf16(sum)) where the program rounds it so (round_trip_to) */
    for (int t = 0; t < sets; t++) {
        ir_value to = cg->round_trip_to ? cg->round_trip_to[made[t]] : IR_NONE;
        if (to != IR_NONE) {
            round[t] = cuda_round_fn(node(cg, arg(cg, to, 0))->dtype);
            made[t] = to;
        }
        add_buf(s, made[t]);
    }
    cg_printf(b, "  const float *part = (const float *)A.buf[0];\n");
    for (int t = 0; t < sets; t++) cg_printf(b, "  float *y%d = (float *)A.buf[%d];\n", t, 1 + t);
    cg_printf(b, "  const long long C = A.n[1];\n");
    cg_printf(b, "  NC_WARP_STRIDE(c, C) {\n    float sum[2] = {0.0f, 0.0f};\n#pragma unroll 8\n    for (int p = NC_LANE; p < %d; p += 32) {\n",
              nparts);
    for (int t = 0; t < sets; t++) cg_printf(b, "      sum[%d] += part[(%d + p) * C + c];\n", t, t * nparts);
    cg_printf(b, "    }\n");
    for (int t = 0; t < sets; t++) {
        char acc[16];
        cg_snprintf(acc, sizeof acc, "sum[%d]", t);
        emit_lanes_combine(b, acc, "a + b");
    }
    cg_printf(b, "    if (NC_LANE == 0) {\n");
    for (int t = 0; t < sets; t++) cg_printf(b, "      y%d[c] = %s(sum[%d]);\n", t, round[t], t);
    cg_printf(b, "    }\n  }\n");
    end_kernel(cg);
    return true;
}

/* Column sums over rows without a [rows, C] tensor: NORM_PARTS blocks each
 * take every NORM_PARTS-th row (its statistics, then g or g xhat into
 * registers for the first 2048 columns, into its own partial row past
 * them), then one thread a column adds the partial rows: the same order
 * every run. A layernorm's weight gradient computes its bias gradient
 * along (cg->bias_grad_with): two sets of partial rows, one pass over x and
 * g. Where the input gradient's kernel kept each row's statistics
 * (cg->stats_from), a column kernel reads them instead. */
static bool cuda_emit_norm_param_grad(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    int wrt = n->attr.axis;
    ir_value bias = cg->bias_grad_with ? cg->bias_grad_with[v] : IR_NONE;
    if (cg->params_by && cg->params_by[v] != IR_NONE) {   /* the input gradient's kernel summed the terms */
        NC_ASSERT(cg->kept_temp[v]);
        return emit_norm_param_sum(cg, v, bias, cg->kept_temp[v], (int)colsum_blocks(cg, x));
    }
    int sets = bias != IR_NONE ? 2 : 1;
    uint32_t C = x->shape[x->rank - 1], rows_numel;
    if (!numel_dim(cg, x, &rows_numel)) return false;
    dim_expr grid_numel, parts_numel, k = dim_const(NORM_PARTS), k2 = dim_const((int64_t)NORM_PARTS * sets);
    if (dim_mul(&cg->g->dims[C], &k, &grid_numel) != DIM_OK || dim_mul(&cg->g->dims[C], &k2, &parts_numel) != DIM_OK) {
        snprintf(cg->err, sizeof cg->err, "norm_param_grad: the partial sums' size overflows");
        return false;
    }
    uint32_t grid = ir_dim_intern((ir_graph *)cg->g, &grid_numel);   /* NORM_PARTS blocks of C */
    uint32_t pn = ir_dim_intern((ir_graph *)cg->g, &parts_numel), parts = new_temp(cg, pn, NC_F32);
    ir_value stats_of = cg->stats_from ? cg->stats_from[v] : IR_NONE;
    if (stats_of != IR_NONE && cg->kept_temp[stats_of])
        return emit_norm_param_columns(cg, v, bias, cg->kept_temp[stats_of], parts, grid, rows_numel) &&
               emit_norm_param_sum(cg, v, bias, parts, NORM_PARTS);
    nrt_step *s = begin_norm_param_parts(cg, v, "_parts", NRT_GRID_ROWS, grid, rows_numel);
    add_buf(s, parts);
    cg_buf *b = &cg->body;
    cg_printf(b, "  float *part = (float *)A.buf[2];\n");
    cg_printf(b, "  const long long C = A.n[1], rows = C > 0 ? A.n[2] / C : 0, parts = gridDim.x;\n");
    cg_printf(b, "  float acc[%d][8];\n#pragma unroll\n  for (int q = 0; q < 8; q++) {", sets);
    for (int t = 0; t < sets; t++) cg_printf(b, " acc[%d][q] = 0.0f;", t);
    cg_printf(b, " }\n");
    for (int t = 0; t < sets; t++)
        cg_printf(b, "  for (long long j = threadIdx.x + 2048; j < C; j += blockDim.x) part[(%d * parts + blockIdx.x) * C + j] = 0.0f;\n", t);
    cg_printf(b, "  for (long long row = blockIdx.x; row < rows; row += parts) {\n");
    if (wrt > 0) emit_row_stats(cg, wrt == 1, n->attr.f);
    /* set 0: this node's sum (g xhat for a weight, g for a bias); set 1: the bias's g */
    cg_printf(b, wrt > 0 ? "#define NC_TERM0(j) (nc_ld(g, row * C + (j)) * (nc_ld(x, row * C + (j)) - mean) * rstd)\n"
                         : "#define NC_TERM0(j) nc_ld(g, row * C + (j))\n");
    cg_printf(b, "#define NC_TERM1(j) nc_ld(g, row * C + (j))\n");
    cg_printf(b, "#pragma unroll\n    for (int q = 0; q < 8; q++) { const long long j = threadIdx.x + q * 256; if (j < C) {");
    for (int t = 0; t < sets; t++) cg_printf(b, " acc[%d][q] += NC_TERM%d(j);", t, t);
    cg_printf(b, " } }\n");
    for (int t = 0; t < sets; t++)
        cg_printf(b, "    for (long long j = threadIdx.x + 2048; j < C; j += blockDim.x) part[(%d * parts + blockIdx.x) * C + j] += NC_TERM%d(j);\n", t, t);
    cg_printf(b, "#undef NC_TERM0\n#undef NC_TERM1\n  }\n");
    cg_printf(b, "#pragma unroll\n  for (int q = 0; q < 8; q++) { const long long j = threadIdx.x + q * 256; if (j < C) {");
    for (int t = 0; t < sets; t++) cg_printf(b, " part[(%d * parts + blockIdx.x) * C + j] = acc[%d][q];", t, t);
    cg_printf(b, " } }\n");
    end_kernel(cg);
    return emit_norm_param_sum(cg, v, bias, parts, NORM_PARTS);
}

/* One block a row: the row's sum, then every element from its y and g. */
static bool cuda_emit_softmax_grad(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *y = node(cg, arg(cg, v, 0));
    bool log_form = n->op == OP_LOG_SOFTMAX_GRAD;
    nrt_step *s = begin_rows(cg, v, y, "");
    if (!s) return false;
    add_buf(s, arg(cg, v, 0));
    add_buf(s, arg(cg, v, 1));
    add_buf(s, v);
    decl_ptr(cg, "y", 0, y->dtype, true);
    decl_ptr(cg, "g", 1, node(cg, arg(cg, v, 1))->dtype, true);
    decl_ptr(cg, "dx", 2, n->dtype, false);
    cg_printf(&cg->body, "  float s = 0.0f;\n");
    cg_printf(&cg->body, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) s += nc_ld(g, row * C + j)%s;\n",
              log_form ? "" : " * nc_ld(y, row * C + j)");
    cg_printf(&cg->body, "  s = nc_block_sum(s);\n");
    cg_printf(&cg->body, "  for (long long j = threadIdx.x; j < C; j += blockDim.x) {\n"
                         "    const float yj = nc_ld(y, row * C + j), gj = nc_ld(g, row * C + j);\n"
                         "    nc_st(dx, row * C + j, %s);\n  }\n",
              log_form ? "gj - expf(yj) * s" : "yj * (gj - s)");
    end_kernel(cg);
    return true;
}

/* Attention, one thread per row: a query (attention, attention_lse, the
 * gradient of q) or a key (the gradients of k and v). Scores are rebuilt in
 * registers with an online softmax and never stored. With key lengths a
 * query stops at its sequence's length and a key past it stays zero. Block-free, so it also
 * runs on the host (tests/unit/test_kernels_host.c); a tiled tensor-core
 * version is the faster kernel to come. */
static bool attention_head_size(cg_ctx *cg, uint32_t dim, int64_t *out)
{
    if (dim_is_const(&cg->g->dims[dim], out) && *out >= 1 && *out <= OP_ATTENTION_MAX_HEAD) return true;
    snprintf(cg->err, sizeof cg->err, "attention: the head size must be a constant between 1 and %d", OP_ATTENTION_MAX_HEAD);
    return false;
}

/* With key lengths (ir_keyword_operand_slot): the dim of how many of q's
 * leading rows (heads) share one length, for the kernel's ints; and the
 * line that reads it for leading row `bt` into `len`, clamped to [0, S]. */
bool cuda_attention_per_length(cg_ctx *cg, ir_value v, uint32_t *per)
{
    const ir_node *n = node(cg, v), *q = node(cg, arg(cg, v, 0));
    ir_node lead = *q;
    lead.rank = (uint8_t)(q->rank - 2);
    return span_dim(cg, &lead, node(cg, arg(cg, v, ir_keyword_operand_slot(n)))->rank, per);
}

void cuda_emit_attention_length(cg_buf *b, const char *indent, const char *bt, int per_slot)
{
    cg_printf(b, "%sconst long long len_given = nc_ld(lens, (%s) / A.n[%d]), len = len_given < 0 ? 0 : len_given < S ? len_given : S;\n",
              indent, bt, per_slot);
}

static bool cuda_emit_attention(cg_ctx *cg, ir_value v)
{
    bool tiled;
    if (!cuda_emit_attention_tiled(cg, v, &tiled)) return false;
    if (tiled) return true;
    const ir_node *n = node(cg, v), *q = node(cg, arg(cg, v, 0));
    int r = q->rank, wrt = n->op == OP_ATTENTION_GRAD ? n->attr.axis : 0;
    bool fwd = n->op == OP_ATTENTION, lse = n->op == OP_ATTENTION_LSE, by_key = !fwd && !lse && wrt > 0;
    int64_t D, E = 1;
    if (!attention_head_size(cg, q->shape[r - 1], &D)) return false;
    if (!lse && !attention_head_size(cg, node(cg, arg(cg, v, 2))->shape[r - 1], &E)) return false;
    ir_node rows = *node(cg, arg(cg, v, by_key ? 1 : 0));
    rows.rank--;
    uint32_t nrows;
    if (!numel_dim(cg, &rows, &nrows)) return false;
    nrt_step *s = begin_kernel(cg, v, "", NRT_GRID_ELEMENTS);
    add_int(s, nrows);
    add_int(s, q->shape[r - 2]);
    add_int(s, node(cg, arg(cg, v, 1))->shape[r - 2]);
    int lens = ir_keyword_operand_slot(n);
    uint32_t per;
    if (lens >= 0) {
        if (!cuda_attention_per_length(cg, v, &per)) return false;
        add_int(s, per);
    }
    static const char *const names[] = {"q", "k", "v", "g", "lse", "delta"};
    for (int i = 0; i < n->nargs; i++) {
        add_buf(s, arg(cg, v, i));
        decl_ptr(cg, i == lens ? "lens" : names[i], i, node(cg, arg(cg, v, i))->dtype, true);
    }
    add_buf(s, v);
    decl_ptr(cg, "out", n->nargs, n->dtype, false);
    char sc[48];
    flit(sc, n->attr.f != 0 ? n->attr.f : 1.0 / sqrt((double)D));
    long long d = D, e = E, width = wrt == 2 ? E : D;
    cg_buf *b = &cg->body;
    cg_printf(b, "  const long long T = A.n[1], S = A.n[2];\n  const float scale = %s;\n", sc);
    cg_printf(b, "  NC_GRID_STRIDE(r, A.n[0]) {\n");
    if (by_key) {   /* key j meets the queries that see it; its own rows stay in registers */
        cg_printf(b, "    const long long bt = r / S, j = r %% S;\n");
        if (lens >= 0) cuda_emit_attention_length(b, "    ", "bt", 3);
        cg_printf(b, "    float kr[%lld], acc[%lld];\n    for (int x = 0; x < %lld; x++) kr[x] = nc_ld(k, r * %lld + x);\n", d, width, d, d);
        if (wrt == 1) cg_printf(b, "    float vr[%lld];\n    for (int x = 0; x < %lld; x++) vr[x] = nc_ld(v, r * %lld + x);\n", e, e, e);
        cg_printf(b, "    for (int x = 0; x < %lld; x++) acc[x] = 0.0f;\n", width);
        cg_printf(b, "    for (long long i = %s; i < %s; i++) {\n", n->attr.causal ? "j" : "0", lens >= 0 ? "(j < len ? T : 0)" : "T");
        cg_printf(b, "      const float lse_i = nc_ld(lse, bt * T + i), delta_i = nc_ld(delta, bt * T + i);\n");
        cg_printf(b, "      float s = 0.0f;\n      for (int x = 0; x < %lld; x++) s += nc_ld(q, (bt * T + i) * %lld + x) * kr[x];\n", d, d);
        cg_printf(b, "      const float p = expf(s * scale - lse_i);\n");
        if (wrt == 2) {
            cg_printf(b, "      for (int x = 0; x < %lld; x++) acc[x] += p * nc_ld(g, (bt * T + i) * %lld + x);\n", e, e);
        } else {
            cg_printf(b, "      float dp = 0.0f;\n      for (int x = 0; x < %lld; x++) dp += nc_ld(g, (bt * T + i) * %lld + x) * vr[x];\n", e, e);
            cg_printf(b, "      const float ds = p * (dp - delta_i);\n");
            cg_printf(b, "      for (int x = 0; x < %lld; x++) acc[x] += ds * nc_ld(q, (bt * T + i) * %lld + x);\n", d, d);
        }
        cg_printf(b, "    }\n    for (int x = 0; x < %lld; x++) nc_st(out, r * %lld + x, acc[x]%s);\n  }\n", width, width,
                  wrt == 1 ? " * scale" : "");
        end_kernel(cg);
        return true;
    }
    /* query i against keys 0 .. jend - 1 */
    if (lens >= 0) {   /* query i against keys 0 .. jend - 1 below its length */
        cg_printf(b, "    const long long bt = r / T, i = r %% T;\n");
        cuda_emit_attention_length(b, "    ", "bt", 3);
        cg_printf(b, "    const long long jend = %s;\n", n->attr.causal ? "(i + 1 < len ? i + 1 : len)" : "len");
    } else {
        cg_printf(b, "    const long long bt = r / T, i = r %% T, jend = %s;\n", n->attr.causal ? "(i + 1 < S ? i + 1 : S)" : "S");
    }
    cg_printf(b, "    float qr[%lld];\n    for (int x = 0; x < %lld; x++) qr[x] = nc_ld(q, r * %lld + x);\n", d, d, d);
    if (fwd || lse) cg_printf(b, "    float m = -__int_as_float(0x7f800000), l = 0.0f;\n");
    if (!lse) cg_printf(b, "    float acc[%lld];\n    for (int x = 0; x < %lld; x++) acc[x] = 0.0f;\n", fwd ? e : d, fwd ? e : d);
    if (!fwd && !lse) {
        cg_printf(b, "    const float lse_i = nc_ld(lse, r), delta_i = nc_ld(delta, r);\n");
        cg_printf(b, "    float gr[%lld];\n    for (int x = 0; x < %lld; x++) gr[x] = nc_ld(g, r * %lld + x);\n", e, e, e);
    }
    cg_printf(b, "    for (long long j = 0; j < jend; j++) {\n");
    cg_printf(b, "      float s = 0.0f;\n      for (int x = 0; x < %lld; x++) s += qr[x] * nc_ld(k, (bt * S + j) * %lld + x);\n"
                 "      s *= scale;\n", d, d);
    if (lse) {
        cg_printf(b, "      if (s > m) { l *= expf(m - s); m = s; }\n      l += expf(s - m);\n    }\n");
        cg_printf(b, "    nc_st(out, r, m + logf(l));\n  }\n");
    } else if (fwd) {   /* online softmax: rescale what is summed when the maximum grows */
        cg_printf(b, "      if (s > m) { const float c = expf(m - s); l *= c; for (int x = 0; x < %lld; x++) acc[x] *= c; m = s; }\n", e);
        cg_printf(b, "      const float p = expf(s - m);\n      l += p;\n");
        cg_printf(b, "      for (int x = 0; x < %lld; x++) acc[x] += p * nc_ld(v, (bt * S + j) * %lld + x);\n    }\n", e, e);
        if (lens >= 0) cg_printf(b, "    if (l == 0.0f) l = 1.0f;   /* no key seen: zeros */\n");
        cg_printf(b, "    for (int x = 0; x < %lld; x++) nc_st(out, r * %lld + x, acc[x] / l);\n  }\n", e, e);
    } else {
        cg_printf(b, "      const float p = expf(s - lse_i);\n      float dp = 0.0f;\n");
        cg_printf(b, "      for (int x = 0; x < %lld; x++) dp += gr[x] * nc_ld(v, (bt * S + j) * %lld + x);\n", e, e);
        cg_printf(b, "      const float ds = p * (dp - delta_i);\n");
        cg_printf(b, "      for (int x = 0; x < %lld; x++) acc[x] += ds * nc_ld(k, (bt * S + j) * %lld + x);\n    }\n", d, d);
        cg_printf(b, "    for (int x = 0; x < %lld; x++) nc_st(out, r * %lld + x, acc[x] * scale);\n  }\n", d, d);
    }
    end_kernel(cg);
    return true;
}

static bool cuda_emit_norm(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    bool ln = n->op == OP_LAYERNORM;
    int64_t C;
    bool warp = cuda_warp_rows(cg, x, &C);
    nrt_step *s = warp ? begin_warp_rows(cg, v, x, C) : begin_rows(cg, v, x, "");
    if (!s) return false;
    for (int i = 0; i < n->nargs; i++) add_buf(s, arg(cg, v, i));
    add_buf(s, v);
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "w", 1, n->dtype, true);
    if (ln) decl_ptr(cg, "b", 2, n->dtype, true);
    decl_ptr(cg, "y", n->nargs, n->dtype, false);
    if (warp) {
        emit_norm_warp_body(cg, ln, n->attr.f, row_chunks(C));
        end_kernel(cg);
        return true;
    }
    emit_row_stats(cg, ln, n->attr.f);
    cg_printf(&cg->body, "  for (long long j = threadIdx.x; j < C; j += blockDim.x)\n");
    cg_printf(&cg->body, "    nc_st(y, row * C + j, (nc_ld(x, row * C + j) - mean) * rstd * nc_ld(w, j)%s);\n",
              ln ? " + nc_ld(b, j)" : "");
    end_kernel(cg);
    return true;
}

/* One block averages the row losses: the same order every run, so the
 * loss is deterministic. */
static void emit_loss_mean(cg_ctx *cg, ir_value v, uint32_t rows, uint32_t losses)
{
    nrt_step *s = begin_kernel(cg, v, "_mean", NRT_GRID_SINGLE);
    add_int(s, rows);
    add_buf(s, losses);
    add_buf(s, v);
    cg_printf(&cg->body, "  const float *loss = (const float *)A.buf[0];\n  float *y = (float *)A.buf[1];\n  float sum = 0.0f;\n");
    cg_printf(&cg->body, "  for (long long j = threadIdx.x; j < A.n[0]; j += blockDim.x) sum += loss[j];\n");
    cg_printf(&cg->body, "  sum = nc_block_sum(sum);\n  if (threadIdx.x == 0) y[0] = sum / (float)A.n[0];\n");
    end_kernel(cg);
}

/* Thread 0's row loss, from the row's statistics (m, sum; total, the row's
 * sum, with smoothing), `bad` (the target out of range: NaN) and the
 * target's logit; closes the thread's branch. */
static void emit_row_loss(cg_ctx *cg, double smoothing, const char *picked)
{
    cg_printf(&cg->body, "    const float lse = m + logf(sum);\n    loss[row] = bad ? __int_as_float(0x7fc00000)\n");
    if (smoothing != 0)
        cg_printf(&cg->body, "              : (1.0f - smoothing) * (lse - (%s)) + smoothing * (lse - total / (float)C);\n  }\n", picked);
    else
        cg_printf(&cg->body, "              : lse - (%s);\n  }\n", picked);
}

/* Row losses into an f32 scratch, then their mean (emit_loss_mean). Where
 * the gradient's kernel, scheduled first, wrote them (cg->loss_rows_with),
 * only the mean. */
static bool cuda_emit_cross_entropy(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0)), *t = node(cg, arg(cg, v, 1));
    uint32_t rows;
    if (!numel_dim(cg, t, &rows)) return false;
    for (ir_value d = 0; cg->loss_rows_with && d < v; d++)
        if (cg->loss_rows_with[d] == v && cg->kept_temp[d]) {
            emit_loss_mean(cg, v, rows, cg->kept_temp[d]);
            return true;
        }
    uint32_t losses = new_temp(cg, rows, NC_F32);
    nrt_step *s = begin_rows(cg, v, x, "_rows");
    if (!s) return false;
    add_buf(s, arg(cg, v, 0));
    add_buf(s, arg(cg, v, 1));
    add_buf(s, losses);
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "target", 1, NC_I32, true);
    char b[48];
    cg_printf(&cg->body, "  float *loss = (float *)A.buf[2];\n  const float smoothing = %s;\n", flit(b, n->attr.f));
    emit_row_online_stats(cg, n->attr.f != 0, 0);   /* one pass: nothing to hold */
    cg_printf(&cg->body, "  if (threadIdx.x == 0) {\n    const int k = target[row];\n    const bool bad = k < 0 || k >= C;\n");
    emit_row_loss(cg, n->attr.f, "bad ? 0.0f : nc_ld(x, row * C + k)");
    end_kernel(cg);
    emit_loss_mean(cg, v, rows, losses);
    return true;
}

/* One block per row: softmax, minus the (smoothed) one-hot target, times
 * the loss's gradient over the row count (the loss is a mean); an
 * out-of-range target gives NaN, as the loss does. */
static bool cuda_emit_cross_entropy_grad(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *x = node(cg, arg(cg, v, 0));
    nrt_step *s = begin_rows(cg, v, x, "");
    if (!s) return false;
    ir_value seed = arg(cg, v, 2);
    bool literal = cg->inlined && cg->inlined[seed];   /* a constant (cuda_fuse.c): no buffer */
    bool loss_rows = cg->loss_rows_with && cg->loss_rows_with[v] != IR_NONE;
    uint32_t rows;
    if (loss_rows && !numel_dim(cg, node(cg, arg(cg, v, 1)), &rows)) return false;
    add_buf(s, arg(cg, v, 0));
    add_buf(s, arg(cg, v, 1));
    if (!literal) add_buf(s, seed);
    if (loss_rows) {   /* before y: a row step's result is its last buffer */
        cg->kept_temp[v] = new_temp(cg, rows, NC_F32);
        cg_printf(&cg->body, "  float *loss = (float *)A.buf[%d];\n", s->nbufs);
        add_buf(s, cg->kept_temp[v]);
    }
    add_buf(s, v);
    decl_ptr(cg, "x", 0, x->dtype, true);
    decl_ptr(cg, "target", 1, NC_I32, true);
    decl_ptr(cg, "y", s->nbufs - 1, n->dtype, false);
    char b[48];
    if (literal) {
        cg_printf(&cg->body, "  const float seed = %s;\n", flit(b, node(cg, seed)->attr.f));
    } else {
        decl_ptr(cg, "g", 2, NC_F32, true);
        cg_printf(&cg->body, "  const float seed = g[0];\n");
    }
    cg_printf(&cg->body, "  const float smoothing = %s;\n", flit(b, n->attr.f));
    cg_printf(&cg->body, "  const int k = target[row];\n  const bool bad = k < 0 || k >= C;\n");
    /* The target's logit is read before the statistics' barriers: y may be
     * x's memory (in place), and past the last barrier another warp may
     * already have stored its gradient over it. */
    cg_printf(&cg->body, "  const float picked = threadIdx.x == 0 && !bad ? nc_ld(x, row * C + k) : 0.0f;\n");
    int held = row_held_chunks(cg, x);
    if (held) emit_row_hold(&cg->body, "y", held);
    emit_row_online_stats(cg, loss_rows && n->attr.f != 0, held);
    /* (exp(a - m) / sum - s/C) g / rows as one multiply-add an element, its
     * factor (NaN for a bad target) and offset computed once; the target's
     * element, less (1 - s) g / rows, is stored again after the row (no
     * compare an element) */
    cg_printf(&cg->body, "  const float scale = seed / (float)(A.n[0] / C), base = smoothing / (float)C, m2 = m * NC_LOG2E;\n");
    cg_printf(&cg->body, "  const float factor = bad ? __int_as_float(0x7fc00000) : scale / sum, off = -base * scale;\n");
    if (loss_rows) {   /* the loss of this row, as cross_entropy's kernel computes it */
        cg_printf(&cg->body, "  if (threadIdx.x == 0) {\n");
        emit_row_loss(cg, n->attr.f, "picked");
    }
    emit_row_loop(&cg->body, "y",
                  "        const float r = fmaf(" ROW_EXP ", factor, off);\n", held);
    cg_printf(&cg->body, "  __syncthreads();   /* whichever thread stored the target's element has */\n");
    cg_printf(&cg->body, "  if (threadIdx.x == 0 && !bad)\n    nc_st(y, row * C + k, fmaf(nc_exp2(fmaf(picked, NC_LOG2E, -m2)), factor, "
                         "off - (1.0f - smoothing) * scale));\n");
    end_kernel(cg);
    return true;
}

/* Whether every value step k touches (through views too) is computed from
 * fills, iotas and sizes alone (konst: ir_constant_values), the same bits
 * every run, and is an index or a mask (integers and bools) or a float
 * scalar (a size's value, f32(N) / f32(N - 1): a launch a run saved for 4
 * bytes kept). A larger float constant (a fill broadcast to a gradient's
 * shape) stays in every run, where fusion makes it for free; kept across
 * runs it would only hold memory that a budget's recomputation cannot give
 * back. */
static bool constant_step(const ir_graph *g, const nrt_program *p, const bool *konst, uint32_t k)
{
    const nrt_step *s = &p->steps[k];
    if (s->kind != NRT_STEP_KERNEL || !nrt_step_param_only(g, konst, s)) return false;
    for (int j = 0; p->slot_values && j < s->nbufs; j++) {
        uint32_t v = p->slot_values[k * NRT_MAX_BUFS + j];
        if (v < g->nnodes && (!konst[v] || (dtype_is_float(g->nodes[v].dtype) && g->nodes[v].rank > 0))) return false;
    }
    return true;
}

/* A training step's kernels that make parameters' low-precision copies
 * which the optimizer's kernels store again (cuda_fuse.c, carry_into) run
 * only when parameters are set from outside: prepare steps. So do kernels
 * that compute from fills and iotas alone (a convolution's window indices,
 * nn.windows: some 60 launches and 0.4 GB a step of fashion_cnn at B = 128),
 * whose values no run changes. A kernel that writes anything else stays in
 * every run. */
static void mark_carried_copies(cg_ctx *cg, nrt_program *p)
{
    const ir_graph *g = cg->g;
    if (!g->nupdates) return;
    bool *from = ir_parameter_values(g), *konst = ir_constant_values(g);
    for (uint32_t k = 0; k < p->nsteps; k++) {
        nrt_step *s = &p->steps[k];
        bool carried = cg->carry_from && s->kind == NRT_STEP_KERNEL && nrt_step_param_only(g, from, s);
        for (int j = 0; j < s->nbufs && carried; j++) {
            uint32_t v = p->slot_values ? p->slot_values[k * NRT_MAX_BUFS + j] : s->bufs[j];
            if (v < g->nnodes && !from[v]) carried = false;
            else if (v >= g->nnodes || cuda_kernel_writes(cg, s->node, v)) carried = v < g->nnodes && cg->carry_from[v] != IR_NONE;
        }
        s->prepare = carried || constant_step(g, p, konst, k);
    }
    free(from);
    free(konst);
    nrt_program_prepare_temps(g, p);
}

/* A matmul step's operands, sizes and dtypes; the caller adds what it
 * writes (cuda_emit_matmul: the product; cuda_epilogue.c: an epilogue's
 * operands and results). */
nrt_step *cuda_matmul_begin(cg_ctx *cg, ir_value v)
{
    const ir_node *n = node(cg, v), *a = node(cg, arg(cg, v, 0)), *b = node(cg, arg(cg, v, 1));
    nrt_step *s = new_step(cg, NRT_STEP_MATMUL, v);
    add_buf(s, arg(cg, v, 0));
    add_buf(s, arg(cg, v, 1));
    s->mm_batch_rank = (uint8_t)(n->rank - 2);
    for (int k = 0; k < n->rank - 2; k++) add_int(s, n->shape[k]);
    add_int(s, n->shape[n->rank - 2]);                       /* M */
    add_int(s, n->shape[n->rank - 1]);                       /* N */
    add_int(s, a->shape[a->rank - (n->attr.ta ? 2 : 1)]);    /* K */
    s->mm_ta = n->attr.ta;
    s->mm_tb = n->attr.tb;
    s->mm_b_shared = b->rank == 2 && n->rank > 2;
    s->mm_dtype = a->dtype;        /* f16/bf16 operands may store an f32 product (f32_result) */
    s->mm_out_dtype = n->dtype;
    return s;
}

static bool cuda_emit_matmul(cg_ctx *cg, ir_value v)
{
    add_buf(cuda_matmul_begin(cg, v), v);
    return true;
}

/* ------------------------------------------------------------------ */

static cuda_emit_fn *const emitters[OP_COUNT] = {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, cuda, cexpr, grad, kw, meaning) [e] = cuda,
#include "ops.def"
#undef X
};

bool cuda_emit_is_elementwise(nc_op op) { return emitters[op] == cuda_emit_elementwise; }




/* Exported wrappers for cuda_fuse.c: the same helpers every emitter uses. */
bool cuda_emit_is_elementwise(nc_op op);
nrt_step *cuda_begin_kernel(cg_ctx *cg, ir_value v, const char *suffix, nrt_grid grid) { return begin_kernel(cg, v, suffix, grid); }
void cuda_end_kernel(cg_ctx *cg) { end_kernel(cg); }
void cuda_kernel_bounds(cg_ctx *cg, int threads, int min_blocks)
{
    cg_snprintf(cg->cur_bounds, sizeof cg->cur_bounds, "__launch_bounds__(%d, %d) ", threads, min_blocks);
}
void cuda_add_buf(nrt_step *s, uint32_t b) { add_buf(s, b); }
bool cuda_reads_through(const cg_ctx *cg, ir_value w) { return read_through(cg, w); }
int cuda_dim_slot(nrt_step *s, uint32_t dim) { return dim_slot(s, dim); }
ir_value cuda_chain_root(const cg_ctx *cg, ir_value w) { return chain_root(cg, w); }
void cuda_emit_read_through(cg_ctx *cg, nrt_step *s, ir_value w, const char *var) { emit_read_through(cg, s, w, var); }
uint32_t cuda_new_temp(cg_ctx *cg, uint32_t numel, nc_dtype t) { return new_temp(cg, numel, t); }
void cuda_add_int(nrt_step *s, uint32_t dim) { add_int(s, dim); }
bool cuda_numel_dim(cg_ctx *cg, const ir_node *n, uint32_t *out) { return numel_dim(cg, n, out); }
void cuda_decl_ptr(cg_ctx *cg, const char *name, int k, nc_dtype t, bool is_const) { decl_ptr(cg, name, k, t, is_const); }
void cuda_expand_expr(cg_ctx *cg, const ir_node *n, const char *expr, const char *step) { expand_expr(cg, n, expr, step); }
const char *cuda_float_literal(char buf[48], double v) { return flit(buf, v); }
const char *cuda_round_fn(nc_dtype t) { return t == NC_F16 ? "nc_round_f16" : t == NC_BF16 ? "nc_round_bf16" : ""; }
const char *cuda_round_pair_fn(nc_dtype t) { return t == NC_F16 ? "nc_round_pair_f16" : t == NC_BF16 ? "nc_round_pair_bf16" : ""; }
/* a random op without its step operand is its inference form, the
 * identity, as on the CPU executor */
const char *cuda_expr_of(const cg_ctx *cg, const ir_node *n)
{
    (void)cg;
    return (nc_ops[n->op].flags & OPF_RANDOM) && ir_step_slot(n) < 0 ? "a" : nc_cuda_exprs[n->op];
}

const char *cuda_prelude(void) { return prelude; }

bool cuda_emit_program(const ir_graph *g, nrt_program *out, char *err, size_t errcap)
{
    return cuda_emit_program_ex(g, false, out, err, errcap);
}

static bool emit_program(const ir_graph *g, bool fuse, bool source, cuda_body_memo *memo, nrt_program *out, char *err,
                         size_t errcap);

bool cuda_emit_program_ex(const ir_graph *g, bool fuse, nrt_program *out, char *err, size_t errcap)
{
    return emit_program(g, fuse, true, NULL, out, err, errcap);
}

bool cuda_emit_program_cost(const ir_graph *g, bool fuse, cuda_body_memo *memo, nrt_program *out, char *err, size_t errcap)
{
    return emit_program(g, fuse, false, memo, out, err, errcap);
}

/* Each parameter's first node (IR_NONE: none), by its index: the updates
 * look theirs up, and scanning the nodes for each was quadratic. */
static ir_value *param_nodes(const ir_graph *g)
{
    ir_value *node = nc_xmalloc((g->nparams + 1) * sizeof *node);
    for (uint32_t i = 0; i <= g->nparams; i++) node[i] = IR_NONE;
    for (ir_value v = g->nnodes; v-- > 0;)
        if (g->nodes[v].op == OP_PARAM && g->nodes[v].attr.index < g->nparams) node[g->nodes[v].attr.index] = v;
    return node;
}

/* source: write the module's source; else only the bodies, which the
 * steps are read off (the comments and the assembled source are not). */
static bool emit_program(const ir_graph *g, bool fuse, bool source, cuda_body_memo *memo, nrt_program *out, char *err,
                         size_t errcap)
{
    memset(out, 0, sizeof *out);
    cg_ctx cg = {.g = g, .prog = out, .memo = memo, .cost_only = !source};
    cg.src.discard = cg.cur_comment.discard = !source;
    cg_printf(&cg.src, "%s", prelude);
    if (fuse) cuda_fuse_plan(&cg);
    for (ir_value v = 0; v < g->nnodes; v++) {
        bool ok = true;
        if (cg.group && cuda_fuse_emit(&cg, v, &ok)) {
            if (ok) continue;
        } else if (cg.group && (cuda_fuse_is_member(&cg, v) || cg.inlined[v])) {
            continue;   /* computed inside its group's kernel */
        } else if (cg.absorbed && cg.absorbed[v]) {
            cuda_epilogue_emit(&cg, v);   /* a matmul with its epilogue, at the epilogue's last op */
            continue;
        }
        if (!ok || !emitters[g->nodes[v].op](&cg, v)) {
            snprintf(err, errcap, "%%%u (%s): %s", v, nc_ops[g->nodes[v].op].name, cg.err);
            free(cg.src.s);
            for (uint32_t k = 0; k < cg.nbodies; k++) free(cg.bodies[k]);
            free(cg.bodies);
            free(cg.bodies_write);
            free(cg.bodies_fact);
            free(cg.body.s);
            free(cg.cur_comment.s);
            cuda_fuse_free(&cg);
            nrt_program_free(out);
            return false;
        }
    }
    /* A training step ends by assigning each update to its parameter's buffer:
     * after every read of the old value, so no kernel sees a half-updated
     * weight (cuda_alias_buffers drops the copies it can). */
    ir_value *param_node = param_nodes(g);
    for (uint32_t i = 0; i < g->nupdates; i++) {
        ir_value pnode = g->updates[i].param < g->nparams ? param_node[g->updates[i].param] : IR_NONE;
        if (pnode == IR_NONE) continue;
        nrt_step *s = new_step(&cg, NRT_STEP_COPY, pnode);
        uint32_t numel;
        if (!numel_dim(&cg, &g->nodes[pnode], &numel)) NC_BUG("parameter size");
        add_int(s, numel);
        add_buf(s, g->updates[i].value);
        add_buf(s, pnode);
    }
    free(param_node);
    cuda_alias_buffers(g, out);
    nrt_program_mark_prepare(g, out);
    mark_carried_copies(&cg, out);
    if (fuse) cuda_batch_launches(&cg);
    out->source = cg.src.s;
    cuda_fuse_free(&cg);
    for (uint32_t k = 0; k < cg.nbodies; k++) free(cg.bodies[k]);
    free(cg.bodies);
    free(cg.bodies_write);
    free(cg.bodies_fact);
    free(cg.body.s);
    free(cg.cur_comment.s);
    return true;
}
