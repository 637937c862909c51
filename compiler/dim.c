/* dim.c - canonical polynomial dims. Every operation checks overflow and
 * capacity and reports it, so a hostile program cannot wrap a size. */
#include "dim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dim_expr dim_const(int64_t v)
{
    dim_expr d = {0};
    if (v != 0) {
        d.nterms = 1;
        d.term[0].coeff = v;
    }
    return d;
}

dim_expr dim_sym(int sym)
{
    dim_expr d = {0};
    d.nterms = 1;
    d.term[0].coeff = 1;
    d.term[0].nfactors = 1;
    d.term[0].sym[0] = (uint8_t)sym;
    return d;
}

bool dim_is_const(const dim_expr *d, int64_t *value)
{
    if (d->nterms == 0) { *value = 0; return true; }
    if (d->nterms == 1 && d->term[0].nfactors == 0) { *value = d->term[0].coeff; return true; }
    return false;
}

/* Monomial order: by degree, then symbol ids; constants first. */
static int term_cmp(const dim_term *a, const dim_term *b)
{
    if (a->nfactors != b->nfactors) return a->nfactors < b->nfactors ? -1 : 1;
    return memcmp(a->sym, b->sym, a->nfactors);
}

bool dim_equal(const dim_expr *a, const dim_expr *b)
{
    if (a->nterms != b->nterms) return false;
    for (int i = 0; i < a->nterms; i++)
        if (a->term[i].coeff != b->term[i].coeff || term_cmp(&a->term[i], &b->term[i]) != 0)
            return false;
    return true;
}

static bool coeff_ok(int64_t c) { return c <= DIM_LIMIT && c >= -DIM_LIMIT; }

/* Insert one term into a sorted expression, merging like terms. */
static dim_status add_term(dim_expr *d, const dim_term *t)
{
    if (t->coeff == 0) return DIM_OK;
    int i = 0;
    while (i < d->nterms && term_cmp(&d->term[i], t) < 0) i++;
    if (i < d->nterms && term_cmp(&d->term[i], t) == 0) {
        int64_t c = d->term[i].coeff + t->coeff;
        if (!coeff_ok(c)) return DIM_OVERFLOW;
        if (c == 0) {
            memmove(&d->term[i], &d->term[i + 1], (size_t)(d->nterms - i - 1) * sizeof(dim_term));
            d->nterms--;
        } else {
            d->term[i].coeff = c;
        }
        return DIM_OK;
    }
    if (d->nterms == DIM_MAX_TERMS) return DIM_TOO_COMPLEX;
    memmove(&d->term[i + 1], &d->term[i], (size_t)(d->nterms - i) * sizeof(dim_term));
    d->term[i] = *t;
    d->nterms++;
    return DIM_OK;
}

dim_status dim_add(const dim_expr *a, const dim_expr *b, dim_expr *out)
{
    dim_expr r = *a;
    for (int i = 0; i < b->nterms; i++) {
        dim_status s = add_term(&r, &b->term[i]);
        if (s != DIM_OK) return s;
    }
    *out = r;
    return DIM_OK;
}

dim_status dim_sub(const dim_expr *a, const dim_expr *b, dim_expr *out)
{
    dim_expr nb = *b;
    for (int i = 0; i < nb.nterms; i++) nb.term[i].coeff = -nb.term[i].coeff;
    return dim_add(a, &nb, out);
}

static int cmp_u8(const void *x, const void *y) { return *(const uint8_t *)x - *(const uint8_t *)y; }

static dim_status term_mul(const dim_term *a, const dim_term *b, dim_term *out)
{
    int64_t c;
    if (__builtin_mul_overflow(a->coeff, b->coeff, &c) || !coeff_ok(c)) return DIM_OVERFLOW;
    if (a->nfactors + b->nfactors > DIM_MAX_FACTORS) return DIM_TOO_COMPLEX;
    dim_term t = {.coeff = c, .nfactors = (uint8_t)(a->nfactors + b->nfactors)};
    memcpy(t.sym, a->sym, a->nfactors);
    memcpy(t.sym + a->nfactors, b->sym, b->nfactors);
    qsort(t.sym, t.nfactors, 1, cmp_u8);
    *out = t;
    return DIM_OK;
}

dim_status dim_mul(const dim_expr *a, const dim_expr *b, dim_expr *out)
{
    dim_expr r = {0};
    for (int i = 0; i < a->nterms; i++)
        for (int j = 0; j < b->nterms; j++) {
            dim_term t;
            dim_status s = term_mul(&a->term[i], &b->term[j], &t);
            if (s == DIM_OK) s = add_term(&r, &t);
            if (s != DIM_OK) return s;
        }
    *out = r;
    return DIM_OK;
}

/* Divide a term by a monomial; fails unless the division is exact. */
static bool term_div(const dim_term *a, const dim_term *m, dim_term *out)
{
    if (a->coeff % m->coeff != 0) return false;
    dim_term t = {.coeff = a->coeff / m->coeff};
    bool used[DIM_MAX_FACTORS] = {0};
    for (int j = 0; j < m->nfactors; j++) {
        int k = 0;
        while (k < a->nfactors && (used[k] || a->sym[k] != m->sym[j])) k++;
        if (k == a->nfactors) return false;
        used[k] = true;
    }
    for (int k = 0; k < a->nfactors; k++)
        if (!used[k]) t.sym[t.nfactors++] = a->sym[k];
    *out = t;
    return true;
}

dim_status dim_div(const dim_expr *a, const dim_expr *b, dim_expr *out)
{
    if (b->nterms == 0) return DIM_DIV_ZERO;
    if (b->nterms != 1) {
        if (dim_equal(a, b)) { *out = dim_const(1); return DIM_OK; }
        return DIM_INEXACT;
    }
    dim_expr r = {0};
    for (int i = 0; i < a->nterms; i++) {
        dim_term t;
        if (!term_div(&a->term[i], &b->term[0], &t)) return DIM_INEXACT;
        dim_status s = add_term(&r, &t);
        if (s != DIM_OK) return s;
    }
    *out = r;
    return DIM_OK;
}

const char *dim_status_message(dim_status s)
{
    switch (s) {
    case DIM_OK: return "ok";
    case DIM_OVERFLOW: return "dimension is too large";
    case DIM_TOO_COMPLEX: return "dimension expression is too complex";
    case DIM_INEXACT: return "dimension does not divide exactly";
    case DIM_DIV_ZERO: return "dimension divided by zero";
    }
    return "?";
}

bool dim_eval(const dim_expr *d, const int64_t *sym_values, int64_t *out)
{
    int64_t sum = 0;
    for (int i = 0; i < d->nterms; i++) {
        int64_t v = d->term[i].coeff;
        for (int k = 0; k < d->term[i].nfactors; k++)
            if (__builtin_mul_overflow(v, sym_values[d->term[i].sym[k]], &v)) return false;
        if (__builtin_add_overflow(sum, v, &sum)) return false;
    }
    if (sum < 0) return false;
    *out = sum;
    return true;
}

size_t dim_format(const dim_expr *d, const char *const *names, char *buf, size_t cap)
{
    size_t n = nc_appendf(buf, cap, 0, "%s", d->nterms ? "" : "0");
    /* symbolic terms first, the constant last: "T + 1", not "1 + T" */
    int order[DIM_MAX_TERMS], k = 0;
    for (int i = 0; i < d->nterms; i++) if (d->term[i].nfactors) order[k++] = i;
    for (int i = 0; i < d->nterms; i++) if (!d->term[i].nfactors) order[k++] = i;
    for (int j = 0; j < k; j++) {
        const dim_term *t = &d->term[order[j]];
        int64_t c = t->coeff;
        if (j > 0) n = nc_appendf(buf, cap, n, c < 0 ? " - " : " + ");
        else if (c < 0 && t->nfactors) n = nc_appendf(buf, cap, n, "-");
        if (c < 0 && (j > 0 || t->nfactors)) c = -c;
        bool wrote = false;
        if (c != 1 || t->nfactors == 0) { n = nc_appendf(buf, cap, n, "%lld", (long long)c); wrote = true; }
        for (int f = 0; f < t->nfactors; f++) {
            n = nc_appendf(buf, cap, n, "%s%s", wrote ? "*" : "", names[t->sym[f]]);
            wrote = true;
        }
    }
    return n;
}
