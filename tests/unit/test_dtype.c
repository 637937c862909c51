/* test_dtype.c - f16 and bf16 rounding: hand-computed edge cases, the bit
 * round trip of every 16-bit encoding, and a sweep of f32 values against an
 * independent reference written with frexp/nearbyint in double. */
#include "dtype.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

static float bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static uint32_t f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

/* Exact comparison that tells -0 from +0 and treats NaN as equal to NaN. */
static bool same(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static void check(const char *what, float in, float got, float want)
{
    if (same(got, want)) return;
    printf("FAIL %s(%.9g [0x%08x]): expected %.9g [0x%08x], got %.9g [0x%08x]\n", what, in, f32_bits(in), want,
           f32_bits(want), got, f32_bits(got));
    failures++;
}

static void check_bits(const char *what, float in, unsigned got, unsigned want)
{
    if (got == want) return;
    printf("FAIL %s(%.9g): expected 0x%04x, got 0x%04x\n", what, in, want, got);
    failures++;
}

static void test_bf16_cases(void)
{
    /* bf16 keeps 7 fraction bits: next to 1 the spacing is 2^-7. */
    float one = 1.0f, u8 = ldexpf(1, -8);
    check("bf16", one + u8, nc_round_bf16(one + u8), one);                           /* tie, 1 is even */
    check("bf16", one + 3 * u8, nc_round_bf16(one + 3 * u8), one + 4 * u8);          /* tie, 1+2^-7 is odd: up */
    check("bf16", one + u8 + ldexpf(1, -20), nc_round_bf16(one + u8 + ldexpf(1, -20)), one + 2 * u8);
    check("bf16", one + 2 * u8, nc_round_bf16(one + 2 * u8), one + 2 * u8);          /* exact */
    check("bf16", -(one + 3 * u8), nc_round_bf16(-(one + 3 * u8)), -(one + 4 * u8)); /* symmetric */
    /* 0x7f7f is the largest finite bf16; 0x7f7f8000 is the tie above it, odd: goes to inf. */
    check("bf16", bits_f32(0x7f7f7fffu), nc_round_bf16(bits_f32(0x7f7f7fffu)), bits_f32(0x7f7f0000u));
    check("bf16", bits_f32(0x7f7f8000u), nc_round_bf16(bits_f32(0x7f7f8000u)), INFINITY);
    check("bf16", -3.4028235e38f, nc_round_bf16(-3.4028235e38f), -INFINITY);
    check("bf16", INFINITY, nc_round_bf16(INFINITY), INFINITY);
    check("bf16", -0.0f, nc_round_bf16(-0.0f), -0.0f);
    check("bf16", NAN, nc_round_bf16(NAN), NAN);
    check("bf16", -NAN, nc_round_bf16(-NAN), NAN);
    /* f32 subnormals: bf16 has the same exponent range, so they round on the same grid. */
    check("bf16", bits_f32(0x00008000u), nc_round_bf16(bits_f32(0x00008000u)), 0.0f);          /* tie to 0 */
    check("bf16", bits_f32(0x00018000u), nc_round_bf16(bits_f32(0x00018000u)), bits_f32(0x00020000u));
    check_bits("bf16 bits", 1.0f, nc_f32_to_bf16_bits(1.0f), 0x3f80);
    check_bits("bf16 bits", -2.0f, nc_f32_to_bf16_bits(-2.0f), 0xc000);
    /* A NaN whose payload lies only in the low 16 bits must not become inf. */
    float nan_low = bits_f32(0x7f800001u);
    if (!isnan(nc_round_bf16(nan_low))) {
        printf("FAIL bf16(NaN 0x7f800001) is not NaN\n");
        failures++;
    }
}

static void test_f16_cases(void)
{
    check("f16", 65504.0f, nc_round_f16(65504.0f), 65504.0f);       /* max finite */
    check("f16", 65519.0f, nc_round_f16(65519.0f), 65504.0f);       /* below the tie 65520 */
    check("f16", 65520.0f, nc_round_f16(65520.0f), INFINITY);       /* the tie rounds to even = inf */
    check("f16", -65520.0f, nc_round_f16(-65520.0f), -INFINITY);
    check("f16", 1e6f, nc_round_f16(1e6f), INFINITY);
    /* Spacing 2^-10 near 1. */
    float one = 1.0f, u11 = ldexpf(1, -11);
    check("f16", one + u11, nc_round_f16(one + u11), one);                       /* tie to even */
    check("f16", one + 3 * u11, nc_round_f16(one + 3 * u11), one + 4 * u11);     /* tie, odd: up */
    check("f16", 2049.0f, nc_round_f16(2049.0f), 2048.0f);                       /* spacing 2 above 2048 */
    check("f16", 2051.0f, nc_round_f16(2051.0f), 2052.0f);
    /* Subnormals: multiples of 2^-24 below 2^-14. */
    float s24 = ldexpf(1, -24), s25 = ldexpf(1, -25);
    check("f16", s24, nc_round_f16(s24), s24);                                   /* smallest subnormal */
    check("f16", s25, nc_round_f16(s25), 0.0f);                                  /* tie between 0 and 2^-24 */
    check("f16", -s25, nc_round_f16(-s25), -0.0f);
    check("f16", nextafterf(s25, 1), nc_round_f16(nextafterf(s25, 1)), s24);     /* just above the tie */
    check("f16", 3 * s25, nc_round_f16(3 * s25), ldexpf(1, -23));                /* 1.5 ulp: tie, odd: up */
    check("f16", 5 * s25, nc_round_f16(5 * s25), ldexpf(1, -23));                /* 2.5 ulp: tie, even: down */
    check("f16", 1023 * s24, nc_round_f16(1023 * s24), 1023 * s24);              /* largest subnormal */
    check("f16", 2047 * s25, nc_round_f16(2047 * s25), ldexpf(1, -14));          /* tie into the normals */
    check("f16", ldexpf(1, -14), nc_round_f16(ldexpf(1, -14)), ldexpf(1, -14));  /* smallest normal */
    check("f16", 1e-10f, nc_round_f16(1e-10f), 0.0f);
    check("f16", -0.0f, nc_round_f16(-0.0f), -0.0f);
    check("f16", NAN, nc_round_f16(NAN), NAN);
    check("f16", -INFINITY, nc_round_f16(-INFINITY), -INFINITY);
    check_bits("f16 bits", 1.0f, nc_f32_to_f16_bits(1.0f), 0x3c00);
    check_bits("f16 bits", -2.0f, nc_f32_to_f16_bits(-2.0f), 0xc000);
    check_bits("f16 bits", 65504.0f, nc_f32_to_f16_bits(65504.0f), 0x7bff);
    check_bits("f16 bits", s24, nc_f32_to_f16_bits(s24), 0x0001);
    check_bits("f16 bits", INFINITY, nc_f32_to_f16_bits(INFINITY), 0x7c00);
    check_bits("f16 bits", -0.0f, nc_f32_to_f16_bits(-0.0f), 0x8000);
    check("nc_round_to", 1 + u11, nc_round_to(NC_F16, one + u11), one);
    check("nc_round_to", one + 3 * ldexpf(1, -8), nc_round_to(NC_BF16, one + 3 * ldexpf(1, -8)),
          one + ldexpf(1, -6));
    check("nc_round_to", one + u11, nc_round_to(NC_F32, one + u11), one + u11);
}

/* Every encoding decodes to a value that encodes back to itself (NaNs to a NaN). */
static void test_round_trip(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = nc_f16_bits_to_f32((uint16_t)h), b = nc_bf16_bits_to_f32((uint16_t)h);
        uint16_t hf = nc_f32_to_f16_bits(f), hb = nc_f32_to_bf16_bits(b);
        bool okf = isnan(f) ? isnan(nc_f16_bits_to_f32(hf)) : hf == h;
        bool okb = isnan(b) ? isnan(nc_bf16_bits_to_f32(hb)) : hb == h;
        if ((!okf || !okb) && bad++ < 10)
            printf("FAIL round trip 0x%04x: f16 -> %.9g -> 0x%04x, bf16 -> %.9g -> 0x%04x\n", h, f, hf, b, hb);
        if (!isnan(f) && (nc_round_f16(f) != f)) bad++;
        if (!isnan(b) && (nc_round_bf16(b) != b)) bad++;
    }
    failures += bad;
}

/* Round |x| to a grid of 2^(e - mant) with e >= emin, ties to even, in double. */
static double ref_round_d(double x, int mant, int emin, double maxfinite)
{
    if (isnan(x)) return x;
    double a = fabs(x);
    if (a == 0 || isinf(a)) return x;
    int e;
    frexp(a, &e);                     /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;                           /* now a in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double ulp = ldexp(1, e - mant), r = nearbyint(a / ulp) * ulp;
    if (r > maxfinite) r = INFINITY;
    return x < 0 ? -r : r;
}

static float ref_round(float x, int mant, int emin, double maxfinite) { return (float)ref_round_d(x, mant, emin, maxfinite); }

/* Every 257th f32 pattern (about 17 million values), both signs, all exponents. */
static void test_against_reference(void)
{
    int bad = 0;
    const double f16_max = 65504.0, bf16_max = (double)bits_f32(0x7f7f0000u);
    for (uint64_t u = 0; u <= 0xffffffffu; u += 257) {
        float x = bits_f32((uint32_t)u);
        float rf = ref_round(x, 10, -14, f16_max), rb = ref_round(x, 7, -126, bf16_max);
        float gf = nc_round_f16(x), gb = nc_round_bf16(x);
        if (!same(gf, rf) && bad++ < 10) printf("FAIL f16(%.9g [0x%08x]): reference %.9g, got %.9g\n", x, (uint32_t)u, rf, gf);
        if (!same(gb, rb) && bad++ < 10) printf("FAIL bf16(%.9g [0x%08x]): reference %.9g, got %.9g\n", x, (uint32_t)u, rb, gb);
    }
    failures += bad;
}

/* float64 straight to f16: a value just past an f16 tie, which f32 would round onto the
 * tie, and random doubles of every f16 exponent against the reference in double. */
static void test_f64_to_f16(void)
{
    const double tie = 1.0 + ldexp(1, -11), past = tie + ldexp(1, -40);   /* f32 rounds past to tie */
    check("f64->f16", (float)past, nc_f16_bits_to_f32(nc_f64_to_f16_bits(past)), 1.0f + ldexpf(1, -10));
    check("f64->f16", (float)tie, nc_f16_bits_to_f32(nc_f64_to_f16_bits(tie)), 1.0f);
    check("f64->f16", (float)-past, nc_f16_bits_to_f32(nc_f64_to_f16_bits(-past)), -1.0f - ldexpf(1, -10));
    check("f64->f16", 65519.0f, nc_f16_bits_to_f32(nc_f64_to_f16_bits(65519.999)), 65504.0f);
    check("f64->f16", 65520.0f, nc_f16_bits_to_f32(nc_f64_to_f16_bits(65520.0)), INFINITY);
    check("f64->f16", INFINITY, nc_f16_bits_to_f32(nc_f64_to_f16_bits(1e300)), INFINITY);
    check("f64->f16", -INFINITY, nc_f16_bits_to_f32(nc_f64_to_f16_bits(-1e300)), -INFINITY);
    check("f64->f16", 0.0f, nc_f16_bits_to_f32(nc_f64_to_f16_bits(1e-300)), 0.0f);
    check("f64->f16", -0.0f, nc_f16_bits_to_f32(nc_f64_to_f16_bits(-1e-300)), -0.0f);
    check("f64->f16", NAN, nc_f16_bits_to_f32(nc_f64_to_f16_bits(NAN)), NAN);
    int bad = 0;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 2000000; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double x = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, (int)(r % 48) - 30);   /* [2^-30, 2^18) */
        if (k & 1) x = -x;
        float got = nc_f16_bits_to_f32(nc_f64_to_f16_bits(x)), want = (float)ref_round_d(x, 10, -14, 65504.0);
        if (!same(got, want) && bad++ < 10) printf("FAIL f64->f16(%.17g): reference %.9g, got %.9g\n", x, want, got);
    }
    failures += bad;
}

/* float64 straight to bf16 (netc run's float64 file for a bf16 input): past a
 * tie that f32 would round onto, the ends of the range, and random doubles of
 * every bf16 exponent (subnormals, and past the largest, to inf). */
static void test_f64_to_bf16(void)
{
    const double tie = 1.0 + ldexp(1, -8), past = tie + ldexp(1, -40);   /* f32 rounds past to tie */
    check("f64->bf16", (float)past, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(past)), 1.0f + ldexpf(1, -7));
    check("f64->bf16", (float)tie, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(tie)), 1.0f);
    check("f64->bf16", (float)-past, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(-past)), -1.0f - ldexpf(1, -7));
    check("f64->bf16", INFINITY, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(1e300)), INFINITY);
    check("f64->bf16", -INFINITY, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(-(double)FLT_MAX)), -INFINITY);
    check("f64->bf16", 0.0f, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(1e-300)), 0.0f);
    check("f64->bf16", -0.0f, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(-1e-300)), -0.0f);
    check("f64->bf16", NAN, nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(NAN)), NAN);
    int bad = 0;
    const double bf16_max = (double)bits_f32(0x7f7f0000u);
    uint64_t r = 0x243f6a8885a308d3ull;
    for (int k = 0; k < 2000000; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double x = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, (int)(r % 272) - 142);   /* [2^-142, 2^130) */
        if (k & 1) x = -x;
        float got = nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(x)), want = (float)ref_round_d(x, 7, -126, bf16_max);
        if (!same(got, want) && bad++ < 10) printf("FAIL f64->bf16(%.17g): reference %.9g, got %.9g\n", x, want, got);
    }
    failures += bad;
}

static void test_names(void)
{
    nc_dtype t;
    if (!dtype_from_name("bf16", &t) || t != NC_BF16 || dtype_size(NC_BF16) != 2 || !dtype_is_float(NC_F16) ||
        dtype_is_float(NC_U8) || dtype_from_name("f64", &t) || strcmp(dtype_name(NC_BOOL), "bool") != 0) {
        printf("FAIL dtype names/properties\n");
        failures++;
    }
}

int main(void)
{
    test_bf16_cases();
    test_f16_cases();
    test_round_trip();
    test_against_reference();
    test_f64_to_f16();
    test_f64_to_bf16();
    test_names();
    if (failures) {
        printf("test_dtype: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_dtype: ok\n");
    return 0;
}
