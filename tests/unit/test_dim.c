/* test_dim.c - canonical symbolic dims: equality, arithmetic, overflow. */
#include "dim.h"

#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static const char *names[] = {"B", "T", "C"};

static void expect_text(const dim_expr *d, const char *want)
{
    char buf[128];
    dim_format(d, names, buf, sizeof buf);
    if (strcmp(buf, want) != 0) {
        fprintf(stderr, "dim text: want '%s', got '%s'\n", want, buf);
        failures++;
    }
}

int main(void)
{
    dim_expr B = dim_sym(0), T = dim_sym(1), four = dim_const(4), r, r2;
    /* B*T == T*B, canonical */
    CHECK(dim_mul(&B, &T, &r) == DIM_OK && dim_mul(&T, &B, &r2) == DIM_OK && dim_equal(&r, &r2));
    expect_text(&r, "B*T");
    /* (B*T)/T == B */
    CHECK(dim_div(&r, &T, &r2) == DIM_OK && dim_equal(&r2, &B));
    /* 4*B / 8 is not exact */
    CHECK(dim_mul(&four, &B, &r) == DIM_OK);
    expect_text(&r, "4*B");
    dim_expr eight = dim_const(8);
    CHECK(dim_div(&r, &eight, &r2) == DIM_INEXACT);
    /* T + 1 - 1 == T; T - T == 0 */
    dim_expr one = dim_const(1);
    CHECK(dim_add(&T, &one, &r) == DIM_OK);
    expect_text(&r, "T + 1");
    CHECK(dim_sub(&r, &one, &r2) == DIM_OK && dim_equal(&r2, &T));
    CHECK(dim_sub(&T, &T, &r) == DIM_OK && r.nterms == 0);
    int64_t k;
    CHECK(dim_is_const(&r, &k) && k == 0);
    /* overflow is reported, never wraps */
    dim_expr big = dim_const((int64_t)1 << 40);
    CHECK(dim_mul(&big, &big, &r) == DIM_OVERFLOW);
    /* evaluation */
    int64_t vals[3] = {16, 1024, 768}, out;
    CHECK(dim_mul(&B, &T, &r) == DIM_OK && dim_eval(&r, vals, &out) && out == 16384);
    dim_expr neg;
    CHECK(dim_sub(&B, &T, &neg) == DIM_OK && !dim_eval(&neg, vals, &out));   /* negative */
    /* capacity: too many factors */
    dim_expr p = B;
    dim_status s = DIM_OK;
    for (int i = 0; i < 5 && s == DIM_OK; i++) s = dim_mul(&p, &B, &p);
    CHECK(s == DIM_TOO_COMPLEX);
    CHECK(dim_div(&B, &(dim_expr){0}, &r) == DIM_DIV_ZERO);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    else printf("test_dim: all checks passed\n");
    return failures != 0;
}
