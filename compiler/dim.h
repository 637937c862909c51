/* dim.h - tensor dimensions as exact polynomials over symbolic sizes.
 *
 * A dim is a number (784), a symbol bound when a session starts (B, T), or
 * arithmetic on them (B*T, 4*C, T+1). Dims are kept in a canonical form (sum of
 * monomials, sorted, like terms merged) so two dims are equal exactly when
 * their canonical forms are equal, and a graph interns them to small ids. */
#ifndef NC_DIM_H
#define NC_DIM_H

#include "base.h"

#define DIM_MAX_TERMS 4
#define DIM_MAX_FACTORS 4
#define DIM_LIMIT ((int64_t)1 << 48) /* no constant or coefficient beyond this */
/* No tensor holds more elements, and no dim is bound to more (a dim is some
 * tensor's extent): the one limit of compiler and runtime alike (libnetrt
 * holds this IR core, and every runtime file includes it). The runtime
 * refuses a buffer past it when dims are bound (program_check_sizes), a
 * --dim or a session's dim value past it, and a .npy or safetensors shape
 * past it; sema refuses a shape known to pass it where it is written.
 * Messages and docs say "2^40": change them with it. */
#define DIM_MAX_NUMEL ((int64_t)1 << 40)
_Static_assert(DIM_MAX_NUMEL == (int64_t)1 << 40, "messages and docs say 2^40 (grep 2^40)");

typedef struct dim_term {
    int64_t coeff;
    uint8_t nfactors;                 /* symbol ids, sorted, repeated for powers */
    uint8_t sym[DIM_MAX_FACTORS];
} dim_term;

typedef struct dim_expr {
    uint8_t nterms;                   /* 0 terms = the constant 0 */
    dim_term term[DIM_MAX_TERMS];
} dim_expr;

typedef enum dim_status {
    DIM_OK,
    DIM_OVERFLOW,        /* a coefficient or constant beyond DIM_LIMIT */
    DIM_TOO_COMPLEX,     /* more terms or factors than the canonical form holds */
    DIM_INEXACT,         /* division with a remainder, or by a non-monomial */
    DIM_DIV_ZERO,
} dim_status;

dim_expr dim_const(int64_t v);
dim_expr dim_sym(int sym);
bool dim_is_const(const dim_expr *d, int64_t *value);
bool dim_equal(const dim_expr *a, const dim_expr *b);
dim_status dim_add(const dim_expr *a, const dim_expr *b, dim_expr *out);
dim_status dim_sub(const dim_expr *a, const dim_expr *b, dim_expr *out);
dim_status dim_mul(const dim_expr *a, const dim_expr *b, dim_expr *out);
dim_status dim_div(const dim_expr *a, const dim_expr *b, dim_expr *out);
const char *dim_status_message(dim_status s);

/* Value under a binding of every symbol; false on overflow or negative result. */
bool dim_eval(const dim_expr *d, const int64_t *sym_values, int64_t *out);

/* Text form: "B*T", "4*C", "T + 1". names[i] names symbol i. As snprintf:
 * writes what fits in cap and returns the whole text's length. */
size_t dim_format(const dim_expr *d, const char *const *names, char *buf, size_t cap);

#endif
