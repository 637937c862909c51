/* dtype.c - dtype properties and exact f16/bf16 rounding. */
#include "dtype.h"

#include <float.h>

#include <math.h>
#include <string.h>

static const struct { const char *name; size_t size; bool is_float; } dtype_info[] = {
#define X(e, n, b, f) [e] = {n, b, f},
    NC_DTYPES(X)
#undef X
};

const char *dtype_name(nc_dtype t) { return t < NC_DTYPE_COUNT ? dtype_info[t].name : "?"; }
size_t dtype_size(nc_dtype t) { return dtype_info[t].size; }
bool dtype_is_float(nc_dtype t) { return dtype_info[t].is_float; }

bool dtype_from_name(const char *s, nc_dtype *out)
{
    for (int t = 0; t < NC_DTYPE_COUNT; t++)
        if (strcmp(s, dtype_info[t].name) == 0) {
            *out = (nc_dtype)t;
            return true;
        }
    return false;
}

static uint32_t f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

uint16_t nc_f32_to_bf16_bits(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN: keep sign, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;                             /* ties to even; overflow carries into inf */
    return (uint16_t)(u >> 16);
}

float nc_bf16_bits_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t nc_f32_to_f16_bits(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;                 /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u;                /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                                      /* below 2^-14: subnormal or zero */
        if (a < 0x33000000u) return sign;                       /* < 2^-25: rounds to zero */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                              /* 14 + (127-e) - 1 ... aligned to 2^-24 units */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t r = a - 0x38000000u;                               /* rebias exponent 127 -> 15 */
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;
    return sign | (uint16_t)(r >> 13);
}

/* x rounded to f32 by round-to-odd (a value between two floats takes the
 * odd one): f32's spare bits then keep whether x lay past a tie of a format
 * of 8 or more bits fewer, so rounding that f32 once more to nearest even
 * gives what rounding x once would. Beyond limit (where the narrow format is
 * inf already) x is taken as limit, kept odd. */
static float f64_to_f32_odd(double x, double limit)
{
    float f = (float)(fabs(x) < limit || !isfinite(x) ? x : copysign(limit, x));
    if ((double)f != x && isfinite(x)) {
        if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
        f = bits_f32(f32_bits(f) | 1u);
    }
    return f;
}

uint16_t nc_f64_to_f16_bits(double x) { return nc_f32_to_f16_bits(f64_to_f32_odd(x, 65536.0)); }   /* 65536 already rounds to inf */

uint16_t nc_f64_to_bf16_bits(double x) { return nc_f32_to_bf16_bits(f64_to_f32_odd(x, FLT_MAX)); }   /* beyond bf16's tie to inf */

float nc_f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

float nc_round_bf16(float x) { return nc_bf16_bits_to_f32(nc_f32_to_bf16_bits(x)); }
float nc_round_f16(float x) { return nc_f16_bits_to_f32(nc_f32_to_f16_bits(x)); }

float nc_round_to(nc_dtype t, float x)
{
    switch (t) {
    case NC_BF16: return nc_round_bf16(x);
    case NC_F16: return nc_round_f16(x);
    default: return x;
    }
}

double nc_float_max(nc_dtype t)
{
    switch (t) {
    case NC_F16: return nc_f16_bits_to_f32(0x7bff);
    case NC_BF16: return nc_bf16_bits_to_f32(0x7f7f);
    default: return FLT_MAX;
    }
}
